// Native core tests: addon loading, program code decoding and runs, error paths, a fuzz of the code, long programs.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  NATIVE_ADDON_PATH,
  kernelIds,
  kernelNames,
  native,
  nativeInfo,
  cudaStatus,
  planNew,
  planFree,
  programNew,
  programFree,
  nativeAvailable,
  programInfo,
  programRun,
  programRunAsync,
  type NativePlan,
  type NativeProgram,
  type NativeArray,
} from '../../runtime/native.ts';
import { ONNX_CODE } from '../../compiler/dtype.ts';
import { DTYPE_CODE } from '../../compiler/kernel-enums.ts';
import { call } from '../../compiler/kernel-schema.ts';
import { testIf } from '../helpers/skip.ts';

// ---- a tiny encoder of the program code of native/PROGRAM.md ----

const MAGIC = 0x31474f5250434c50n;
const ARENA = 0,
  WEIGHT = 1,
  INPUT = 2,
  ALIAS = 3;
const F32 = DTYPE_CODE.float32!,
  I64 = DTYPE_CODE.int64!;

interface Term {
  coeff: number | bigint;
  factors: number[];
}
interface TensorSpec {
  kind: number;
  dtype: number;
  a: number;
  b?: number;
  dims: number[];
}
interface KernelSpec {
  name: string;
  ins: number[];
  outs: number[];
  iargs?: number[];
  fargs?: number[];
  variant?: number;
}
interface ProgramSpec {
  nSyms: number;
  exprs: Term[][];
  tensors: TensorSpec[];
  kernels: KernelSpec[];
  inputs: number[];
  outputs: number[];
  arenaBytes: number;
  nWeights: number;
}

function encode(p: ProgramSpec): BigInt64Array {
  const w: bigint[] = [
    MAGIC,
    ...[
      p.nSyms,
      p.exprs.length,
      p.tensors.length,
      p.kernels.length,
      p.inputs.length,
      p.outputs.length,
      p.arenaBytes,
      p.nWeights,
      0,
    ].map(BigInt),
  ];
  const push = (...xs: (number | bigint)[]) => {
    for (const x of xs) w.push(BigInt(x));
  };
  for (const e of p.exprs) {
    push(e.length);
    for (const t of e) push(t.coeff, t.factors.length, ...t.factors);
  }
  for (const t of p.tensors) push(t.kind, t.dtype, t.dims.length, t.a, t.b ?? 0, ...t.dims);
  const ids = kernelIds();
  for (const k of p.kernels) {
    const id = ids.get(k.name);
    if (id === undefined) throw new Error(`no kernel ${k.name}`);
    const fargs = (k.fargs ?? []).map((f) => new BigInt64Array(new Float64Array([f]).buffer)[0]);
    push(
      id,
      k.variant ?? 0,
      k.ins.length,
      k.outs.length,
      k.iargs?.length ?? 0,
      fargs.length,
      ...k.ins,
      ...k.outs,
      ...(k.iargs ?? []),
      ...fargs,
    );
  }
  push(...p.inputs, ...p.outputs);
  return BigInt64Array.from(w);
}

const konst = (v: number): Term[] => [{ coeff: v, factors: [] }];
const sym = (i: number): Term[] => [{ coeff: 1, factors: [i] }];

function has(name: string): boolean {
  return nativeAvailable() && kernelIds().has(name);
}

/** The byte-copy kernel: cast.cc's `copy`, or `test_copy` of a build with PLANC_TEST_KERNELS=ON. */
function copyKernel(): string | undefined {
  return has('copy') ? 'copy' : has('test_copy') ? 'test_copy' : undefined;
}

function blobOf(...arrays: Float32Array[]): { blob: Uint8Array; weights: BigInt64Array } {
  const pairs: bigint[] = [];
  let size = 0;
  for (const a of arrays) {
    pairs.push(BigInt(size), BigInt(a.byteLength));
    size += Math.ceil(a.byteLength / 64) * 64;
  }
  const blob = new Uint8Array(size);
  arrays.forEach((a, i) => blob.set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), Number(pairs[2 * i])));
  return { blob, weights: BigInt64Array.from(pairs) };
}

/** y = copy(x), x float32 [n] (n = symbol 0), y in an arena slot of 64 floats. */
function copySpec(name: string): ProgramSpec {
  return {
    nSyms: 1,
    exprs: [sym(0)],
    arenaBytes: 256,
    nWeights: 0,
    tensors: [
      { kind: INPUT, dtype: F32, a: 0, dims: [0] },
      { kind: ARENA, dtype: F32, a: 0, b: 256, dims: [0] },
    ],
    kernels: [{ name, ins: [0], outs: [1] }],
    inputs: [0],
    outputs: [1],
  };
}

function throwsMatching(fn: () => unknown, re: RegExp): void {
  try {
    fn();
  } catch (e) {
    assert.instance(e, Error);
    assert.match((e as Error).message, re);
    return;
  }
  assert.unreachable(`expected an error matching ${re}`);
}

async function rejectsMatching(p: Promise<unknown>, re: RegExp): Promise<void> {
  try {
    await p;
  } catch (e) {
    assert.instance(e, Error);
    assert.match((e as Error).message, re);
    return;
  }
  assert.unreachable(`expected a rejection matching ${re}`);
}

// ---- loading and info ----

test('the addon is built and loads', () => {
  try {
    native();
  } catch (e) {
    assert.unreachable(`${(e as Error).message}`);
  }
  assert.ok(NATIVE_ADDON_PATH.endsWith('.node'));
});

test('kernelNames: unique names in id order; info and cudaStatus', () => {
  const names = kernelNames();
  assert.ok(Array.isArray(names));
  assert.is(new Set(names).size, names.length);
  for (const [name, id] of kernelIds()) assert.is(names[id], name);
  const info = nativeInfo();
  assert.ok(Number.isInteger(info.threads) && info.threads >= 1);
  assert.ok(info.blas === 'openblas' || info.blas === 'builtin');
  assert.type(info.simd, 'string');
  const cuda = cudaStatus();
  assert.type(cuda.available, 'boolean');
  if (!cuda.available) assert.match(cuda.reason, /^no GPU/);
});

test('setThreads recreates the pool; bad counts are errors', () => {
  const before = nativeInfo().threads;
  native().setThreads(1);
  assert.is(nativeInfo().threads, 1);
  native().setThreads(before);
  assert.is(nativeInfo().threads, before);
  throwsMatching(() => native().setThreads(0), /integer in \[1, 1024\]/);
  throwsMatching(() => native().setThreads(1.5), /integer/);
});

// ---- plans ----

test('planNew checks every weight range and the arena size', () => {
  const blob = new Uint8Array(100);
  throwsMatching(
    () => planNew(blob, new BigInt64Array([0n, 101n]), 0),
    /weight #0.*does not lie inside the blob of 100 bytes/,
  );
  throwsMatching(() => planNew(blob, new BigInt64Array([0n, 10n, 95n, 6n]), 0), /weight #1/);
  throwsMatching(() => planNew(blob, new BigInt64Array([-1n, 1n]), 0), /weight #0/);
  throwsMatching(() => planNew(blob, new BigInt64Array([0n, -1n]), 0), /weight #0/);
  throwsMatching(() => planNew(blob, new BigInt64Array([1n << 62n, 1n << 62n]), 0), /weight #0/);
  throwsMatching(() => planNew(blob, new BigInt64Array([0n]), 0), /pairs/);
  throwsMatching(() => planNew(blob, new BigInt64Array(0), -1), /arenaBytes/);
  throwsMatching(() => planNew(blob, new BigInt64Array(0), 0.5), /arenaBytes/);
  throwsMatching(() => planNew(blob, new BigInt64Array(0), 2 ** 52), /absurdly large/);
  throwsMatching(() => planNew(blob, new Float64Array(2) as unknown as BigInt64Array, 0), /BigInt64Array/);
  throwsMatching(() => planNew('x' as unknown as Uint8Array, new BigInt64Array(0), 0), /TypedArray/);
  const plan = planNew(blob, new BigInt64Array([0n, 10n, 64n, 36n, 100n, 0n]), 1000);
  planFree(plan);
  planFree(plan); // freeing twice is harmless
  throwsMatching(() => programNew(plan, new BigInt64Array(10)), /plan handle was freed/);
});

test('handles are type-checked', () => {
  const plan = planNew(new Uint8Array(0), new BigInt64Array(0), 64);
  throwsMatching(() => programNew({} as NativePlan, new BigInt64Array(10)), /expected a plan handle/);
  throwsMatching(
    () => programRun(plan as unknown as NativeProgram, new BigInt64Array(0), [], []),
    /expected a program handle/,
  );
  throwsMatching(() => programFree(plan as unknown as NativeProgram), /expected a program handle/);
  planFree(plan);
});

// ---- decoding ----

test('programNew rejects malformed code with the word position', () => {
  const plan = planNew(new Uint8Array(0), new BigInt64Array(0), 256);
  const empty: ProgramSpec = {
    nSyms: 0,
    exprs: [],
    tensors: [],
    kernels: [],
    inputs: [],
    outputs: [],
    arenaBytes: 0,
    nWeights: 0,
  };
  const ok = programNew(plan, encode(empty));
  assert.equal(programInfo(ok), { symbols: 0, inputs: 0, outputs: 0, kernels: 0 });
  programRun(ok, new BigInt64Array(0), [], []);
  const code = encode(empty);
  throwsMatching(() => programNew(plan, code.slice(0, 9)), /10-word header/);
  throwsMatching(() => programNew(plan, BigInt64Array.from([...code, 0n])), /1 words are left over/);
  const bad = (i: number, v: bigint, re: RegExp) => {
    const c = code.slice();
    c[i] = v;
    throwsMatching(() => programNew(plan, c), re);
  };
  bad(0, 1n, /word 0: bad magic/);
  bad(1, 5000n, /n_syms/);
  bad(2, 1n, /counts need/);
  bad(3, -1n, /n_tensors = -1 is outside/);
  bad(7, 257n, /arena_bytes/);
  bad(8, 1n, /n_weights/);
  bad(9, 1n, /reserved/);
  const name = copyKernel() ?? kernelNames()[0];
  if (name !== undefined) {
    const spec = copySpec(name);
    const good = encode(spec);
    programFree(programNew(plan, good));
    const mutate = (i: number, v: bigint, re: RegExp) => {
      const c = good.slice();
      c[i] = v;
      throwsMatching(() => programNew(plan, c), re);
    };
    // words: header 0-9, expr 10-13 (n_terms, coeff, n_factors, sym), tensor 0 at 14-19, tensor 1 at 20-25,
    // kernel 26-33 (id, variant, counts, input, output), graph input 34, output 35
    mutate(13, 1n, /word 13: a factor's symbol index = 1 is outside \[0, 0\]/);
    mutate(14, 5n, /tensor's kind/);
    mutate(15, BigInt(ONNX_CODE.uint16), new RegExp(`unsupported dtype ${ONNX_CODE.uint16}`)); // a dtype plans do not support
    mutate(16, 9n, /rank = 9/);
    mutate(17, 1n, /input index 1 is outside/);
    mutate(19, 1n, /dim expression index = 1/);
    mutate(20, BigInt(ALIAS), /b = 256 must be 0/);
    mutate(23, 200n, /arena slot \[offset 200, 256 bytes\] is outside/);
    mutate(26, BigInt(kernelNames().length), /kernel id/);
    mutate(27, 1n, new RegExp(`word 27: kernel ${name} has no variant 1 \\(it has one implementation: 0\\)`));
    mutate(33, 0n, /kernel output tensor #0 is not an arena or state tensor/);
    mutate(34, 1n, /graph input 0 names tensor #1, which is not INPUT or STATE 0/);
    mutate(35, 2n, /graph output's tensor = 2/);
  }
  programFree(ok);
  planFree(plan);
});

// ---- runs ----

testIf(test, !copyKernel() && 'no copy kernel in this build')(
  'y = copy(x): runs, symbols size the tensors, every size is checked',
  async () => {
    const name = copyKernel()!;
    const plan = planNew(new Uint8Array(0), new BigInt64Array(0), 256);
    const prog = programNew(plan, encode(copySpec(name)));
    assert.equal(programInfo(prog), { symbols: 1, inputs: 1, outputs: 1, kernels: 1 });
    const x = Float32Array.from([1, 2, 3, 4, 5]);
    const y = new Float32Array(5);
    programRun(prog, new BigInt64Array([5n]), [x], [y]);
    assert.equal(Array.from(y), [1, 2, 3, 4, 5]);
    const z = new Float32Array(64);
    programRun(prog, new BigInt64Array([64n]), [new Float32Array(64).fill(7)], [z]);
    assert.is(z[63], 7);
    const e = new Float32Array(0);
    programRun(prog, new BigInt64Array([0n]), [e], [new Float32Array(0)]); // empty tensors
    throwsMatching(
      () => programRun(prog, new BigInt64Array([65n]), [new Float32Array(65)], [new Float32Array(65)]),
      /needs 260 bytes but its arena slot holds 256/,
    );
    throwsMatching(
      () => programRun(prog, new BigInt64Array([5n]), [new Float32Array(4)], [y]),
      /tensor #0 \(float32 \[5\]\) has 20 bytes but its feed has 16/,
    );
    throwsMatching(
      () => programRun(prog, new BigInt64Array([5n]), [x], [new Float32Array(4)]),
      /output 0: .* has 20 bytes but its buffer has 16/,
    );
    throwsMatching(() => programRun(prog, new BigInt64Array([-1n]), [x], [y]), /dim 0 = -1 is negative/);
    throwsMatching(() => programRun(prog, new BigInt64Array([]), [x], [y]), /expected 1 symbol values, got 0/);
    throwsMatching(() => programRun(prog, new BigInt64Array([5n]), [], [y]), /expected 1 feeds, got 0/);
    throwsMatching(() => programRun(prog, new BigInt64Array([5n]), [x], []), /expected 1 output buffers, got 0/);
    throwsMatching(
      () =>
        programRun(prog, new BigInt64Array([5n]), [x as unknown as Float32Array, 3 as unknown as Float32Array], [y]),
      /feeds\[1\] must be a TypedArray/,
    );
    throwsMatching(
      () => programRun(prog, new BigInt64Array([5n]), [new Uint8Array(21).subarray(1)], [y]),
      /not aligned/,
    );
    throwsMatching(() => programRun(prog, [5n] as unknown as BigInt64Array, [x], [y]), /symbols must be a TypedArray/);
    // async: same results, and the plan is busy meanwhile
    const y2 = new Float32Array(5);
    const run = programRunAsync(prog, new BigInt64Array([5n]), [x], [y2]);
    throwsMatching(() => programRun(prog, new BigInt64Array([5n]), [x], [y]), /plan is busy/);
    await rejectsMatching(programRunAsync(prog, new BigInt64Array([5n]), [x], [y]), /plan is busy/);
    x.fill(9); // feeds were copied when the run started
    await run;
    assert.equal(Array.from(y2), [1, 2, 3, 4, 5]);
    await rejectsMatching(
      programRunAsync(prog, new BigInt64Array([6n]), [x], [y2]),
      /has 24 bytes but its feed has 20/,
    );
    await rejectsMatching(
      programRunAsync(prog, new BigInt64Array([5n]), [x], 7 as unknown as NativeArray[]),
      /outputs must be an array/,
    );
    // freeing the program during an async run is safe: the run keeps it
    const y3 = new Float32Array(5);
    const run3 = programRunAsync(prog, new BigInt64Array([5n]), [x], [y3]);
    programFree(prog);
    planFree(plan);
    await run3;
    assert.equal(Array.from(y3), [9, 9, 9, 9, 9]);
    throwsMatching(() => programRun(prog, new BigInt64Array([5n]), [x], [y]), /program handle was freed/);
  },
);

test('two plans run at the same time; output buffers are re-checked when an async run ends', async () => {
  const name = copyKernel();
  if (!name) return;
  const plans = [0, 1].map(() => planNew(new Uint8Array(0), new BigInt64Array(0), 256));
  const progs = plans.map((p) => programNew(p, encode(copySpec(name))));
  const outs = [new Float32Array(3), new Float32Array(3)];
  await Promise.all(
    progs.map((p, i) => programRunAsync(p, new BigInt64Array([3n]), [Float32Array.from([i, i, i])], [outs[i]])),
  );
  assert.equal(Array.from(outs[1]), [1, 1, 1]);
  const detached = new Float32Array(3);
  const run = programRunAsync(progs[0], new BigInt64Array([3n]), [Float32Array.from([1, 2, 3])], [detached]);
  structuredClone(detached.buffer, { transfer: [detached.buffer] }); // detach the output buffer mid-run
  await rejectsMatching(run, /output 0: .* has 12 bytes but its buffer has 0/);
  programRun(progs[0], new BigInt64Array([3n]), [Float32Array.from([1, 2, 3])], [outs[0]]); // the plan was released
  assert.equal(Array.from(outs[0]), [1, 2, 3]);
});

test('aliases reshape, weights and inputs can be outputs, alias sizes are checked', () => {
  const name = copyKernel();
  if (!name) return;
  const w = Float32Array.from([10, 20, 30]);
  const { blob, weights } = blobOf(w);
  const plan = planNew(blob, weights, 1024);
  // x [2, n] → y = copy(x) → z = alias of y as [n, 2]; outputs z, the weight, and x itself
  const spec: ProgramSpec = {
    nSyms: 1,
    exprs: [konst(2), sym(0), konst(3)],
    arenaBytes: 1024,
    nWeights: 1,
    tensors: [
      { kind: INPUT, dtype: F32, a: 0, dims: [0, 1] },
      { kind: ARENA, dtype: F32, a: 64, b: 512, dims: [0, 1] },
      { kind: ALIAS, dtype: F32, a: 1, dims: [1, 0] },
      { kind: WEIGHT, dtype: F32, a: 0, dims: [2] },
    ],
    kernels: [{ name, ins: [0], outs: [1] }],
    inputs: [0],
    outputs: [2, 3, 0],
  };
  const prog = programNew(plan, encode(spec));
  const x = Float32Array.from([1, 2, 3, 4, 5, 6]);
  const outs = [new Float32Array(6), new Float32Array(3), new Float32Array(6)];
  programRun(prog, new BigInt64Array([3n]), [x], outs);
  assert.equal(Array.from(outs[0]), [1, 2, 3, 4, 5, 6]);
  assert.equal(Array.from(outs[1]), [10, 20, 30]);
  assert.equal(Array.from(outs[2]), [1, 2, 3, 4, 5, 6]);
  // an alias whose dims disagree in size with its target, a weight of the wrong size
  const badAlias = structuredClone(spec);
  badAlias.tensors[2].dims = [1, 1];
  throwsMatching(
    () => programRun(programNew(plan, encode(badAlias)), new BigInt64Array([3n]), [x], outs),
    /tensor #2 \(float32 \[3, 3\]\) has 36 bytes but its alias target has 24/,
  );
  const badWeight = structuredClone(spec);
  badWeight.tensors[3].dims = [0];
  throwsMatching(
    () => programRun(programNew(plan, encode(badWeight)), new BigInt64Array([3n]), [x], outs),
    /tensor #3 \(float32 \[2\]\) has 8 bytes but its weight has 12/,
  );
  // kernel outputs may not be weights, inputs or aliases of them
  const intoWeight = structuredClone(spec);
  intoWeight.kernels[0].outs = [3];
  throwsMatching(() => programNew(plan, encode(intoWeight)), /kernel output tensor #3 is not an arena or state tensor/);
  const aliasInput = structuredClone(spec);
  aliasInput.tensors[2].a = 0;
  aliasInput.kernels[0].outs = [2];
  throwsMatching(() => programNew(plan, encode(aliasInput)), /kernel output tensor #2 is not an arena or state tensor/);
  // an alias must name an earlier tensor
  const forward = structuredClone(spec);
  forward.tensors[2].a = 3;
  throwsMatching(() => programNew(plan, encode(forward)), /alias target \(an earlier tensor\) 3 is outside \[0, 2\)/);
});

testIf(test, !has('test_echo') && 'test_echo needs a build with PLANC_TEST_KERNELS=ON')(
  'expressions: polynomials of symbols, overflow past 2^62 is an error',
  () => {
    const plan = planNew(new Uint8Array(0), new BigInt64Array(0), 64);
    // y int64 [3] = echo(iargs: 2·a·b − 3, a·a·a·a, 7; fargs: 0.5): the ints are the expressions 0, 1 and 2
    const echo = call('test_echo', { ints: [0, 1, 2], floats: [0.5] });
    const echoArgs = { iargs: echo.iargs as number[], fargs: echo.fargs };
    const spec: ProgramSpec = {
      nSyms: 2,
      arenaBytes: 64,
      nWeights: 0,
      exprs: [
        [
          { coeff: 2, factors: [0, 1] },
          { coeff: -3, factors: [] },
        ],
        [{ coeff: 1, factors: [0, 0, 0, 0] }],
        konst(7),
        konst(4),
      ],
      tensors: [{ kind: ARENA, dtype: I64, a: 0, b: 64, dims: [3] }],
      kernels: [{ name: 'test_echo', ins: [], outs: [0], ...echoArgs }],
      inputs: [],
      outputs: [0],
    };
    const prog = programNew(plan, encode(spec));
    const y = new BigInt64Array(4);
    programRun(prog, new BigInt64Array([5n, 11n]), [], [y]);
    assert.equal(Array.from(y.slice(0, 3)), [107n, 625n, 7n]);
    assert.is(new Float64Array(y.buffer)[3], 0.5);
    programRun(prog, new BigInt64Array([-5n, 0n]), [], [y]);
    assert.equal(Array.from(y.slice(0, 3)), [-3n, 625n, 7n]);
    throwsMatching(
      () => programRun(prog, new BigInt64Array([1n << 16n, 0n]), [], [y]),
      /expression #1 overflows past 2\^62/,
    );
    throwsMatching(
      () => programRun(prog, new BigInt64Array([1n << 31n, 1n << 31n]), [], [y]),
      /expression #0 overflows/,
    );
    throwsMatching(() => programRun(prog, new BigInt64Array([-(1n << 63n), 1n]), [], [y]), /overflows/);
    const big = structuredClone(spec);
    big.exprs[0] = [{ coeff: (1n << 62n) + 1n, factors: [] }];
    throwsMatching(() => programNew(plan, encode(big)), /coefficient/);
  },
);

test('kernel errors name the kernel index and name', () => {
  const plan = planNew(new Uint8Array(0), new BigInt64Array(0), 256);
  if (has('test_fail')) {
    const spec: ProgramSpec = {
      nSyms: 0,
      exprs: [],
      tensors: [],
      kernels: [{ name: 'test_fail', ins: [-1, -1], outs: [] }],
      inputs: [],
      outputs: [],
      arenaBytes: 0,
      nWeights: 0,
    };
    throwsMatching(
      () => programRun(programNew(plan, encode(spec)), new BigInt64Array(0), [], []),
      /^kernel #0 \(test_fail\): test_fail: failed on purpose \(2 inputs\)$/,
    );
  }
  if (has('add')) {
    // shapes that do not broadcast: the kernel itself must refuse
    const spec: ProgramSpec = {
      nSyms: 0,
      exprs: [konst(2), konst(3)],
      arenaBytes: 256,
      nWeights: 0,
      tensors: [
        { kind: INPUT, dtype: F32, a: 0, dims: [0] },
        { kind: INPUT, dtype: F32, a: 1, dims: [1] },
        { kind: ARENA, dtype: F32, a: 0, b: 64, dims: [1] },
      ],
      kernels: [{ name: 'add', ins: [0, 1], outs: [2] }],
      inputs: [0, 1],
      outputs: [2],
    };
    throwsMatching(
      () =>
        programRun(
          programNew(plan, encode(spec)),
          new BigInt64Array(0),
          [new Float32Array(2), new Float32Array(3)],
          [new Float32Array(3)],
        ),
      /^kernel #0 \(add\): /,
    );
  }
});

testIf(test, !has('add') && 'no add kernel in this build')('y = add(x, w) with a weight and a symbolic batch', () => {
  const { blob, weights } = blobOf(new Float32Array(5), Float32Array.from([1, 2, 3]));
  const plan = planNew(blob, weights, 1024);
  const spec: ProgramSpec = {
    nSyms: 1,
    exprs: [sym(0), konst(3)],
    arenaBytes: 1024,
    nWeights: 2,
    tensors: [
      { kind: INPUT, dtype: F32, a: 0, dims: [0, 1] },
      { kind: WEIGHT, dtype: F32, a: 1, dims: [1] },
      { kind: ARENA, dtype: F32, a: 128, b: 512, dims: [0, 1] },
    ],
    kernels: [{ name: 'add', ins: [0, 1], outs: [2] }],
    inputs: [0],
    outputs: [2],
  };
  const prog = programNew(plan, encode(spec));
  const y = new Float32Array(6);
  programRun(prog, new BigInt64Array([2n]), [Float32Array.from([10, 20, 30, 40, 50, 60])], [y]);
  assert.equal(Array.from(y), [11, 22, 33, 41, 52, 63]);
});

// ---- fuzzing the code ----

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface FuzzCase {
  spec: ProgramSpec;
  syms: bigint[];
  feedFloats: number[];
}

/** Small valid programs to mutate, with symbol values and feed sizes that run them. */
function fuzzCases(name: string | undefined): FuzzCase[] {
  const cases: FuzzCase[] = [];
  if (name) {
    cases.push({ spec: copySpec(name), syms: [5n], feedFloats: [5] });
    cases.push({
      syms: [2n, 3n],
      feedFloats: [6],
      spec: {
        nSyms: 2,
        exprs: [sym(0), sym(1), [{ coeff: 1, factors: [0, 1] }], konst(4)],
        arenaBytes: 2048,
        nWeights: 1,
        tensors: [
          { kind: INPUT, dtype: F32, a: 0, dims: [0, 1] },
          { kind: ARENA, dtype: F32, a: 0, b: 512, dims: [0, 1] },
          { kind: ALIAS, dtype: F32, a: 1, dims: [2] },
          { kind: ARENA, dtype: F32, a: 512, b: 512, dims: [2] },
          { kind: WEIGHT, dtype: F32, a: 0, dims: [3] },
          { kind: ARENA, dtype: F32, a: 1024, b: 64, dims: [3] },
        ],
        kernels: [
          { name, ins: [0], outs: [1] },
          { name, ins: [2], outs: [3] },
          { name, ins: [4], outs: [5] },
        ],
        inputs: [0],
        outputs: [3, 5],
      },
    });
  }
  if (has('add')) {
    cases.push({
      syms: [2n],
      feedFloats: [8],
      spec: {
        nSyms: 1,
        exprs: [sym(0), konst(4)],
        arenaBytes: 2048,
        nWeights: 1,
        tensors: [
          { kind: INPUT, dtype: F32, a: 0, dims: [0, 1] },
          { kind: WEIGHT, dtype: F32, a: 0, dims: [1] },
          { kind: ARENA, dtype: F32, a: 0, b: 1024, dims: [0, 1] },
        ],
        kernels: [{ name: 'add', ins: [0, 1], outs: [2] }],
        inputs: [0],
        outputs: [2],
      },
    });
  }
  return cases;
}

function mutateWord(r: () => number, v: bigint, len: number): bigint {
  const pick = Math.floor(r() * 8);
  switch (pick) {
    case 0:
      return BigInt(Math.floor(r() * (len + 4)) - 2);
    case 1:
      return v + 1n;
    case 2:
      return v - 1n;
    case 3:
      return BigInt.asIntN(64, v ^ (1n << BigInt(Math.floor(r() * 64))));
    case 4:
      return [0n, -1n, 1n << 31n, 1n << 62n, -(1n << 63n), (1n << 63n) - 1n, 4096n, 65536n][Math.floor(r() * 8)];
    case 5:
      return BigInt.asIntN(64, (BigInt(Math.floor(r() * 2 ** 32)) << 32n) | BigInt(Math.floor(r() * 2 ** 32)));
    default:
      return BigInt(Math.floor(r() * 12));
  }
}

function mutate(r: () => number, code: BigInt64Array): BigInt64Array {
  let words = Array.from(code);
  const edits = 1 + Math.floor(r() * 3);
  for (let i = 0; i < edits; i++) {
    const at = Math.floor(r() * words.length);
    const kind = r();
    if (kind < 0.8) words[at] = mutateWord(r, words[at], words.length);
    else if (kind < 0.9) words.splice(at, 1);
    else words.splice(at, 0, mutateWord(r, 0n, words.length));
  }
  if (r() < 0.05) words = words.slice(0, Math.floor(r() * words.length));
  return BigInt64Array.from(words);
}

/** Runs prog, resizing output buffers to what the errors ask for (so mutations reach the kernels); true if it ran. */
function runResizing(prog: NativeProgram, syms: BigInt64Array, feeds: NativeArray[], outs: Float32Array[]): boolean {
  for (let attempt = 0; attempt < 4; attempt++) {
    try {
      programRun(prog, syms, feeds, outs);
      return true;
    } catch (e) {
      assert.instance(e, Error);
      const m = /^output (\d+): .* has (\d+) bytes/.exec((e as Error).message);
      if (!m || Number(m[2]) > 1 << 20 || Number(m[2]) % 4 !== 0) return false;
      outs[Number(m[1])] = new Float32Array(Number(m[2]) / 4);
    }
  }
  return false;
}

const FUZZ_ITERS = Number(process.env.PLANC_FUZZ_ITERS ?? 10000);
const FUZZ_SEED = Number(process.env.PLANC_FUZZ_SEED ?? 0x5eed);

testIf(test, !copyKernel() && !has('add') && 'neither a copy nor an add kernel in this build')(
  `fuzz: ${FUZZ_ITERS} mutated programs each decode and run or throw an Error`,
  () => {
    const cases = fuzzCases(copyKernel());
    const { blob, weights } = blobOf(Float32Array.from([1, 2, 3, 4]));
    const plan = planNew(blob, weights, 4096);
    const codes = cases.map((c) => encode(c.spec));
    const r = rng(FUZZ_SEED);
    let decoded = 0,
      ran = 0;
    for (let i = 0; i < FUZZ_ITERS; i++) {
      const c = cases[i % cases.length];
      const code = mutate(r, codes[i % cases.length]);
      let prog: NativeProgram;
      try {
        prog = programNew(plan, code);
      } catch (e) {
        assert.instance(e, Error);
        continue;
      }
      decoded++;
      const info = programInfo(prog);
      const faithful = r() < 0.7; // the original symbols and feed sizes, or random ones
      const syms = BigInt64Array.from({ length: info.symbols }, (_, k) =>
        faithful && k < c.syms.length ? c.syms[k] : BigInt(Math.floor(r() * 6)),
      );
      const feeds = Array.from(
        { length: info.inputs },
        (_, k) => new Float32Array(faithful && k < c.feedFloats.length ? c.feedFloats[k] : Math.floor(r() * 40)),
      );
      const outs = Array.from({ length: info.outputs }, () => new Float32Array(Math.floor(r() * 40)));
      if (runResizing(prog, syms, feeds, outs)) ran++;
      programFree(prog);
    }
    console.log(`  fuzz (seed ${FUZZ_SEED}): ${decoded} of ${FUZZ_ITERS} mutations decoded, ${ran} ran to the end`);
    assert.ok(decoded > 100);
    assert.ok(ran > 20);
  },
);

// ---- long programs (the per-kernel overhead is timed by benches, never asserted here) ----

testIf(test, !copyKernel() && 'no copy kernel in this build')(
  'a run of 300 chained copies gives its input back, run after run',
  () => {
    const name = copyKernel()!;
    const tensors: TensorSpec[] = [{ kind: INPUT, dtype: F32, a: 0, dims: [0] }];
    const ks: KernelSpec[] = [];
    for (let i = 0; i < 300; i++) {
      tensors.push({ kind: ARENA, dtype: F32, a: (i % 2) * 64, b: 64, dims: [0] });
      ks.push({ name, ins: [i], outs: [i + 1] });
    }
    const spec: ProgramSpec = {
      nSyms: 0,
      exprs: [konst(16)],
      arenaBytes: 128,
      nWeights: 0,
      tensors,
      kernels: ks,
      inputs: [0],
      outputs: [300],
    };
    const plan = planNew(new Uint8Array(0), new BigInt64Array(0), 128);
    const prog = programNew(plan, encode(spec));
    const x = Float32Array.from({ length: 16 }, (_, i) => i);
    const y = new Float32Array(16);
    for (let i = 0; i < 200; i++) programRun(prog, new BigInt64Array(0), [x], [y]);
    assert.equal(Array.from(y), Array.from(x));
  },
);

test.run();
