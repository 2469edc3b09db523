// The kernel schema (compiler/kernel-schema.ts) is the one statement of every kernel's operands and arguments: calls are
// built by name, it matches the native kernel table, program_new checks counts against it, and no other source names
// an argument position or a dtype code.
import { execSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  CUDA_TEMPLATES,
  KERNELS,
  arity,
  call,
  iargIndex,
  operandSpec,
  schemaProblems,
  type KernelSpec,
} from '../compiler/kernel-schema.ts';
import { KERNEL_ENUMS } from '../compiler/kernel-enums.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import type { PlanProgram } from '../compiler/plan/types.ts';
import { CUDA_RULES } from '../codegen/cuda/rules.ts';
import { cudaTemplate } from '../codegen/cuda/template-call.ts';
import { encodeProgram } from '../runtime/encode-program.ts';
import { kernelIds, kernelNames, nativeAvailable, planNew, programNew } from '../runtime/native.ts';
import { GENERATED } from '../scripts/gen-kernel-enums.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';

const specs = KERNELS as Record<string, KernelSpec>;

test('the declarations are sound (snake_case unique names, optional and variadic entries last)', () => {
  assert.equal(schemaProblems(), []);
});

test('call orders named arguments as the kernel declares them; enum value names become codes', () => {
  const a = call('attention', {
    scale: 0.125,
    is_causal: 1,
    mask_kind: 'bool_keep',
    kv_len: 7,
    q_layout: 1,
    num_heads: 8,
  });
  assert.equal([a.kernel, a.iargs, a.fargs], ['attention', [8, 1, 7, 2, 1], [0.125]]);
  assert.equal(call('pad', { pads: [1, 2, 3, 4], mode: 'edge' }).iargs, [2, 1, 2, 3, 4]);
  assert.equal(call('fused_matmul', { activation: 'gelu_tanh' }).iargs, [3]);
  assert.equal(call('gemm', { trans_b: 1, trans_a: 0, beta: 0.5, alpha: 2 }), {
    kernel: 'gemm',
    iargs: [0, 1],
    fargs: [2, 0.5],
  } as never);
  assert.equal([call('mod').iargs, call('mod', { fmod: 1 }).iargs], [[], [1]]);
  assert.equal(
    [call('range', { start: 1, delta: 2 }).iargs, call('range', { start: 1, delta: 2 }).fargs],
    [[], [1, 2]],
  );
  assert.equal(
    [call('range', { start_int: 3, delta_int: 1 }).iargs, call('range', { start_int: 3, delta_int: 1 }).fargs],
    [[3, 1], []],
  );
  assert.equal(call('relu'), { kernel: 'relu', iargs: [], fargs: [] } as never);
});

test('call refuses unknown kernels and arguments, missing and out-of-order ones (compile errors, then internal errors)', () => {
  // @ts-expect-error: no such kernel
  assert.throws(() => call('gelu_fast'), /internal: no kernel 'gelu_fast'/);
  // @ts-expect-error: softmax has no argument 'base'
  const withBase = () => call('softmax', { axis: 1, log: 0, base: 2 });
  assert.throws(withBase, /internal: kernel 'softmax' has no argument 'base'/);
  // @ts-expect-error: 'log' is missing
  assert.throws(() => call('softmax', { axis: 1 }), /internal: kernel 'softmax' call lacks argument 'log'/);
  // @ts-expect-error: 'mirror' is not a pad mode
  const mirror = () => call('pad', { mode: 'mirror', pads: [] });
  assert.throws(mirror, /'mirror' is not a value of enum pad_mode \(constant, reflect, edge, wrap\)/);
  // @ts-expect-error: relu takes no arguments
  assert.throws(() => call('relu', { alpha: 1 }), /has no argument 'alpha'/);
  assert.throws(() => call('range', { delta: 2 }), /gives 'delta' but not 'start' before it/);
});

test('counts: optional operands may be left off the end unless they keep their slot; variadic lists are unbounded', () => {
  assert.equal(arity(KERNELS.attention), {
    minIn: 3,
    maxIn: 5,
    minOut: 1,
    maxOut: 1,
    minIargs: 5,
    maxIargs: 5,
    minFargs: 1,
    maxFargs: 1,
  });
  assert.equal([arity(KERNELS.fused_matmul).minIn, arity(KERNELS.project_topk).minIn], [4, 3]);
  assert.equal(
    [
      arity(KERNELS.concat).minIn,
      arity(KERNELS.concat).maxIn,
      arity(KERNELS.pad).minIargs,
      arity(KERNELS.pad).maxIargs,
    ],
    [1, Infinity, 1, Infinity],
  );
  assert.equal([arity(KERNELS.layer_norm).minOut, arity(KERNELS.layer_norm).maxOut], [1, 3]);
  assert.is(operandSpec('split', 'outputs', 5)?.name, 'parts');
  assert.is(operandSpec('add', 'inputs', 2), undefined);
  assert.is(iargIndex('attention', 'is_causal'), 4);
  assert.throws(() => iargIndex('attention', 'causal'), /internal: kernel 'attention' has no int argument 'causal'/);
});

test('every CUDA rule is for a declared kernel', () => {
  const unknown = Object.keys(CUDA_RULES).filter((k) => !specs[k] || specs[k]!.testOnly);
  assert.equal(unknown, []);
});

testIf(test, !nativeAvailable() && NEEDS_NATIVE)(
  'the schema declares exactly the native kernel table (test-only kernels where built)',
  () => {
    const table = kernelNames();
    const undeclared = table.filter((k) => !specs[k]);
    const absent = Object.keys(specs).filter((k) => !specs[k]!.testOnly && !table.includes(k));
    assert.equal(undeclared, [], `native kernels without a schema entry: ${undeclared.join(', ')}`);
    assert.equal(absent, [], `schema kernels the native table lacks: ${absent.join(', ')}`);
  },
);

testIf(test, !nativeAvailable() && NEEDS_NATIVE)("program_new checks every call's counts against the schema", () => {
  const program = (inputs: number[]): PlanProgram => ({
    graph: 'g',
    symbols: [],
    exprs: [{ terms: [{ coeff: 2, factors: [] }] }],
    tensors: [
      { name: 'x', kind: 2, dtype: 1, dims: [0], offset: 0, slotBytes: 0, ref: 0 },
      { name: 'y', kind: 0, dtype: 1, dims: [0], offset: 0, slotBytes: 64, ref: 0 },
    ],
    kernels: [{ name: 'add', inputs, outputs: [1], iargs: [], fargs: [], node: 'n', origin: [] }],
    inputs: [{ name: 'x', tensor: 0 }],
    outputs: [{ name: 'y', tensor: 1 }],
    arenaBytes: 64,
    arenaLowerBound: 0,
    tensorBytesSum: 0,
    fusedOps: {},
  });
  const plan = planNew(new Uint8Array(0), new BigInt64Array(0), 64);
  programNew(plan, encodeProgram(program([0, 0]), 0, kernelIds()));
  assert.throws(
    () => programNew(plan, encodeProgram(program([0]), 0, kernelIds())),
    /add: needs 2 inputs, 1 output, 0 iargs and 0 fargs; got 1, 1, 0 and 0/,
  );
});

/** Source files (tracked or new, not ignored) under `dirs`, with the given extensions, less `except`. */
function files(dirs: string[], ext: RegExp, except: string[] = []): string[] {
  return execSync('git ls-files --cached --others --exclude-standard', { cwd: REPO_ROOT, encoding: 'utf8' })
    .split('\n')
    .filter(
      (f) =>
        ext.test(f) &&
        dirs.some((d) => f.startsWith(d)) &&
        !except.includes(f) &&
        fs.existsSync(path.join(REPO_ROOT, f)),
    );
}

/** `file:line: text` of every line of `list` matching `re`. */
function grep(list: string[], re: RegExp): string[] {
  const hits: string[] = [];
  for (const f of list) {
    fs.readFileSync(path.join(REPO_ROOT, f), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (re.test(line)) hits.push(`${f}:${i + 1}: ${line.trim()}`);
      });
  }
  return hits;
}

const GENERATED_FILES = GENERATED.map(([f]) => f);

test('no kernel or CUDA template names an argument position by number (they use <kernel>_args::k<Name>)', () => {
  const native = files(['native/src/', 'codegen/cuda/kernels/'], /\.(cc|h|cuh)$/, GENERATED_FILES);
  assert.ok(native.length > 20, `${native.length} files`);
  assert.equal(grep(native, /\b[if]args\s*\[\s*\d|\b[if]args\s*\+\s*\d/), []);
});

test('lowering and the CUDA rules build and read arguments by name (no positional iargs/fargs, no constIarg)', () => {
  const ts = files(
    ['codegen/', 'compiler/', 'model/', 'passes/', 'runtime/', 'optimize/', 'serve/', 'pages/', 'cli/', 'index.ts'],
    /\.ts$/,
    ['compiler/kernel-schema.ts'],
  );
  assert.equal(grep(ts, /\b[if]args\s*:\s*\[|\bconstIarg\s*\(|\.[if]args\s*\[\s*\d/), []);
});

test('the CUDA templates of codegen/cuda/kernels declare exactly the parameter lists of CUDA_TEMPLATES', () => {
  const declared: Record<string, string> = {};
  for (const f of files(['codegen/cuda/kernels/'], /\.cuh$/, GENERATED_FILES)) {
    const text = fs.readFileSync(path.join(REPO_ROOT, f), 'utf8');
    for (const m of text.matchAll(/template <([^>]*)>\s*__device__ void (\w+)\(const KArgs& a\)/g))
      declared[m[2]!] = m[1]!.split(/\s+/).join(' ');
  }
  assert.equal(declared, { ...CUDA_TEMPLATES });
});

test('the CUDA rules instantiate templates by parameter name (cudaTemplate), never as planc::NAME<...> text', () => {
  const names = Object.keys(CUDA_TEMPLATES).join('|');
  assert.equal(grep(['codegen/cuda/rules.ts'], new RegExp(`planc::(${names})<`)), []);
  assert.is(cudaTemplate('attention', { D: 64, QL: 0, MK: 2, CAUSAL: true }), 'planc::attention<64, 0, 2, true>');
  assert.is(
    cudaTemplate('attention', { CAUSAL: false, PAST: true, MK: 0, QL: 1, D: 32 }),
    'planc::attention<32, 1, 0, false, true>',
  );
  assert.is(
    cudaTemplate('gemv', { ACT: 0, BIAS: true, RES: false, VEC2: true, KS: 4, TW: '__half' }),
    'planc::gemv<0, true, false, true, 4, __half>',
  );
  const err = (f: () => unknown) => {
    try {
      f();
      return '';
    } catch (e) {
      return (e as Error).message;
    }
  };
  assert.match(
    err(() => cudaTemplate('attention', { D: 64, QL: 0, MK: 2, CAUSAL: true, MASK: 1 })),
    /no parameter 'MASK'/,
  );
  assert.match(
    err(() => cudaTemplate('attention', { D: 64, QL: 0, CAUSAL: true })),
    /'MK' is left out but 'CAUSAL' after it is given/,
  );
  assert.match(
    err(() => cudaTemplate('norm', { D0: 512, RMS: true })),
    /'BIAS' is missing/,
  );
  assert.match(
    err(() => cudaTemplate('copy', { ELEM: true })),
    /'ELEM' wants an int/,
  );
});

/** This file: it states calls' expected positions and codes on purpose. */
const SELF = 'test/kernel-schema.test.ts';

/** A dtype code written as a number: compared with or assigned to a dtype, a dtype-named constant, a C++ DType. */
const DTYPE_CODE_RE =
  /\.dtype\s*[!=]==?\s*\d|\.dtype\s*=\s*\d|\bdtype\s*:\s*\d|\bk(Float|Int|Uint|Bool)\w*\s*=\s*\d|\b[FIU](8|16|32|64)\s*=\s*\d|\bDType\s*\(\s*\d|\bTensor\s*(\w+\s*)?\(\s*\d|\bmake(_vec)?<[^>]*>\s*\(\s*\d/;

test('no source outside compiler/dtype.ts, compiler/kernel-enums.ts and the generated headers names a dtype code', () => {
  const own = ['compiler/dtype.ts', 'compiler/kernel-enums.ts', SELF, ...GENERATED_FILES];
  const sources = files(
    [
      'codegen/',
      'compiler/',
      'model/',
      'passes/',
      'runtime/',
      'optimize/',
      'serve/',
      'pages/',
      'cli/',
      'index.ts',
      'scripts/',
      'bench/',
      'native/src/',
      'native/test/',
      'test/',
    ],
    /\.(ts|cc|h|cuh)$/,
    own,
  );
  assert.ok(sources.length > 150, `${sources.length} files`);
  assert.equal(grep(sources, DTYPE_CODE_RE), []);
});

/** The names of the enum-typed kernel arguments (mask_kind, mode, ...) and the C++ enum types of kernel_enums.h. */
const ENUM_ARGS = [
  ...new Set(Object.values(specs).flatMap((s) => (s.iargs ?? []).filter((a) => a.enum).map((a) => a.name))),
];
const ENUM_TYPES = Object.values(KERNEL_ENUMS).map((e) => e.cpp);

test('bench/ and test/ build kernel calls by name and name enum values (no positional iargs/fargs, no codes)', () => {
  const ts = files(['bench/', 'test/'], /\.ts$/, [SELF]);
  assert.ok(ts.length > 50, `${ts.length} files`);
  // a non-empty iargs / fargs list written out, or one read or written by position
  assert.equal(grep(ts, /\b[if]args\s*:\s*\[\s*[^\]\s]|\.[if]args\s*\[\s*\d/), []);
  // an enum argument given a code: call('pad', { mode: 2 })
  assert.equal(grep(ts, new RegExp(`\\b(${ENUM_ARGS.join('|')})\\s*:\\s*-?\\d`)), []);
});

/** Statements of C++ text that pass a brace list of values after a brace list of operand views (the iargs/fargs of a call). */
function positionalLists(text: string): number[] {
  const lines: number[] = [];
  const lineOf = (i: number) => text.slice(0, i).split('\n').length;
  const operands = (t: string) => /\bview\b|TensorView|^\{\s*&/.test(t);
  for (let open = text.indexOf('('); open >= 0; open = text.indexOf('(', open + 1)) {
    // the top-level arguments of the call opening here
    const args: string[] = [];
    let depth = 0;
    let start = open + 1;
    for (let j = open; j < text.length; j++) {
      const c = text[j]!;
      if (c === '"' || c === "'") {
        j++;
        while (j < text.length && text[j] !== c) j += text[j] === '\\' ? 2 : 1;
        continue;
      }
      if (c === '/' && text[j + 1] === '/') {
        j = text.indexOf('\n', j);
        if (j < 0) break;
        continue;
      }
      if ('([{'.includes(c)) depth++;
      else if (')]}'.includes(c) && --depth === 0) {
        args.push(text.slice(start, j).trim());
        break;
      } else if (c === ',' && depth === 1) {
        args.push(text.slice(start, j).trim());
        start = j + 1;
      }
    }
    let afterOperands = false;
    for (const a of args) {
      const list = a.startsWith('{') && a.endsWith('}');
      if (list && operands(a)) afterOperands = true;
      else if (list && afterOperands && a.slice(1, -1).trim() !== '') lines.push(lineOf(open));
    }
  }
  return [...new Set(lines)];
}

test('the C++ kernel tests pass arguments by name (kernel_calls.h builders) and name enum values', () => {
  const cc = files(['native/test/'], /\.(cc|h)$/, GENERATED_FILES);
  assert.ok(cc.length > 15, `${cc.length} files`);
  const marked = (lines: string[], n: number) =>
    /positional on purpose/.test(`${lines[n - 2] ?? ''}\n${lines[n - 1]}\n${lines[n] ?? ''}`);
  const hits: string[] = [];
  for (const f of cc) {
    const text = fs.readFileSync(path.join(REPO_ROOT, f), 'utf8');
    const lines = text.split('\n');
    // brace lists passed as iargs / fargs, and raw calls, outside the calls marked "positional on purpose"
    for (const n of positionalLists(text)) if (!marked(lines, n)) hits.push(`${f}:${n}: ${lines[n - 1]!.trim()}`);
    lines.forEach((line, i) => {
      if (/\bcall_positional\s*\(/.test(line) && !/^\s*inline /.test(line) && !marked(lines, i + 1))
        hits.push(`${f}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.equal(hits, []);
  // an argument read by position; an enum argument compared with, assigned or cast from a code
  const enumCode = new RegExp(
    `\\b(${[...ENUM_ARGS, 'act'].join('|')})\\s*(==|!=|<=?|>=?|=)\\s*-?\\d|\\b(${ENUM_TYPES.join('|')})\\s*\\(\\s*-?\\d`,
  );
  assert.equal(grep(cc, /\b[if]args\s*\[\s*\d/), []);
  assert.equal(grep(cc, enumCode), []);
});

test('the guard finds positional lists after operand lists, and only those', () => {
  assert.equal(positionalLists('test::call(k_gemm, {a.view, b.view}, {y.view}, {0, 1},\n {1.0, 0.0}, nullptr);'), [1]);
  assert.equal(positionalLists('f(x);\ngo({q.view}, {3, 0, 5}, y.view);'), [2]);
  assert.equal(
    positionalLists('test::call(k, {a.view}, {y.view}, test::gemm_call().trans_a(0), pool); f32({2, 3}, {1, 2});'),
    [],
  );
  assert.equal(positionalLists('call(k, {x.view}, {y.view}, transpose_call().perm({1, 0}));'), []);
});

test.run();
