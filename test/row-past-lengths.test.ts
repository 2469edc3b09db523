// Rows with their own cached length (issue 27): planc.Attention's input 5 and planc.CacheWrite's input 3, past_lens
// int64 [B], in the reference evaluator (model/ops/planc-attention.ts), the lowering (CPU and CUDA rules) and the
// CUDA templates on the emulated device (test/native/row-past-lengths-sim.cu). Each batch row's output is exactly what the
// same op gives that row alone with kv_len = past_lens[b] + Sq; bad values are named errors. The CPU kernels' own
// tests are native/test/attention_test.cc.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { CPU_RULES, type RuleCtx as CpuRuleCtx } from '../codegen/cpu-rules.ts';
import { templateSource } from '../codegen/cuda/generate.ts';
import { CUDA_RULES, type Operand, type RuleCtx as CudaRuleCtx } from '../codegen/cuda/rules.ts';
import { DTYPE_CODE } from '../compiler/kernel-enums.ts';
import { iargIndex } from '../compiler/kernel-schema.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import type { Attr, Node } from '../compiler/ir.ts';
import { MASK_KIND, PLANC_ATTENTION_OPS } from '../model/ops/planc-attention.ts';
import type { EvalContext, InferContext, InferInput, OpHandler } from '../model/ops/types.ts';
import { sym, type Dim } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { CUDASIM_DIR } from '../runtime/backends/cudasim.ts';
import { testIf } from './helpers/skip.ts';

const handler = (op: string): OpHandler => PLANC_ATTENTION_OPS.find((h) => h.op === op)!;
const ATTENTION = handler('Attention'),
  CACHE_WRITE = handler('CacheWrite');

function node(op: string, inputs: string[], attrs: Record<string, number>): Node {
  const a: Record<string, Attr> = Object.fromEntries(
    Object.entries(attrs).map(([k, v]) => [
      k,
      Number.isInteger(v) && k !== 'scale' ? { kind: 'int', value: v } : { kind: 'float', value: v },
    ]),
  );
  return { name: `${op}_0`, op, domain: 'planc', inputs, outputs: ['y'], attrs: a, origin: [] };
}

/** A context for one node: its attributes, and fail throws the message. */
function context(n: Node): EvalContext & InferContext {
  const num = (name: string, def?: number): number => {
    const a = n.attrs[name];
    if (a && (a.kind === 'int' || a.kind === 'float')) return a.value;
    if (def === undefined) throw new Error(`missing attribute ${name}`);
    return def;
  };
  const no = (): never => {
    throw new Error('internal: not in this test');
  };
  return {
    node: n,
    opset: 1,
    has: (name) => name in n.attrs,
    attr: (name) => n.attrs[name],
    int: num,
    float: num,
    string: (_n, d) => d ?? no(),
    ints: (_n, d) => d ?? no(),
    floats: (_n, d) => d ?? no(),
    strings: (_n, d) => d ?? no(),
    tensor: no,
    graph: no,
    fail: (m) => {
      throw new Error(m);
    },
    runSubgraph: no,
    inferSubgraph: no,
  };
}

const ATTRS = { num_heads: 2, q_layout: 0, mask_kind: MASK_KIND.NONE, is_causal: 0, scale: 0.375 };
type Attrs = typeof ATTRS;
const NAMES = ['q', 'k', 'v', 'mask', 'kv_len', 'past_lens'];

function attention(attrs: Attrs, inputs: (Tensor | undefined)[]): Tensor {
  const n = node(
    'Attention',
    NAMES.slice(0, inputs.length).map((x, i) => (inputs[i] ? x : '')),
    attrs,
  );
  return ATTENTION.eval(context(n), inputs)[0]!;
}

/** Deterministic values in [-1, 1). */
function values(n: number, seed: number): number[] {
  let s = (seed * 2654435761) % 4294967296 || 1;
  return Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 1073741824 - 1;
  });
}
const f32 = (dims: number[], seed: number) =>
  Tensor.fromNumbers(
    'float32',
    dims,
    values(
      dims.reduce((a, b) => a * b, 1),
      seed,
    ),
  );
const i64 = (dims: number[], v: number[]) => Tensor.fromNumbers('int64', dims, v);

/** Batch row b of t (dim 0 is B), as [1, ...]. */
function row(t: Tensor, b: number): Tensor {
  const per = t.size / t.dims[0]!;
  return new Tensor(t.dtype, [1, ...t.dims.slice(1)], (t.nums as Float32Array).slice(b * per, (b + 1) * per));
}

/** The mask row b alone gets: batch row b (unless broadcast), its first lb keys (unless broadcast). */
function maskRow(m: Tensor, b: number, lb: number): Tensor {
  const [mb, mh, ms, ml] = m.dims as [number, number, number, number];
  const keep = ml === 1 ? 1 : lb;
  const out: number[] = [];
  for (let x = 0; x < mh * ms; x++)
    for (let j = 0; j < keep; j++) out.push(m.nums[((mb === 1 ? 0 : b) * mh * ms + x) * ml + j]!);
  return Tensor.fromNumbers(m.dtype, [1, mh, ms, keep], out);
}

/** K or V [B, H, C, D] with every row at or past row b's own length NaN (reading one would show). */
function poisoned(t: Tensor, lens: number[]): Tensor {
  const [B, H, C, D] = t.dims as [number, number, number, number];
  const data = Float32Array.from(t.nums);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let j = lens[b]!; j < C; j++) data.fill(NaN, ((b * H + h) * C + j) * D, ((b * H + h) * C + j + 1) * D);
  return new Tensor('float32', t.dims, data);
}

interface Case {
  B: number;
  Sq: number;
  C: number;
  past: number[];
  layout: number;
  causal: number;
  kind: number;
  mask?: number[];
}

function checkRows(c: Case): void {
  const H = 2,
    D = 4,
    L = Math.max(...c.past) + c.Sq;
  const name = `B${c.B} Sq${c.Sq} past ${c.past} layout ${c.layout} causal ${c.causal} kind ${c.kind} mask [${c.mask ?? ''}]`;
  const attrs = { ...ATTRS, q_layout: c.layout, is_causal: c.causal, mask_kind: c.kind };
  const q = f32(c.layout === 0 ? [c.B, H, c.Sq, D] : [c.B, c.Sq, H * D], 1);
  const lens = c.past.map((p) => p + c.Sq);
  const k = poisoned(f32([c.B, H, c.C, D], 2), lens),
    v = poisoned(f32([c.B, H, c.C, D], 3), lens);
  let mask: Tensor | undefined;
  if (c.kind === MASK_KIND.ADD) {
    const m = f32(c.mask!, 4);
    const data = Float32Array.from(m.nums, (x, i) => (i % 5 === 0 ? -Infinity : x));
    mask = new Tensor('float32', m.dims, data);
  } else if (c.kind === MASK_KIND.BOOL_KEEP || c.kind === MASK_KIND.BOOL_DROP)
    mask = Tensor.fromNumbers(
      'bool',
      c.mask!,
      values(
        c.mask!.reduce((a, b) => a * b, 1),
        5,
      ).map((x) => (x < 0.4 ? 1 : 0)),
    );
  const y = attention(attrs, [q, k, v, mask, i64([], [L]), i64([c.B], c.past)]);
  const per = y.size / c.B;
  for (let b = 0; b < c.B; b++) {
    const alone = attention(attrs, [
      row(q, b),
      row(k, b),
      row(v, b),
      mask && maskRow(mask, b, lens[b]!),
      i64([], [lens[b]!]),
    ]);
    const got = (y.nums as Float32Array).slice(b * per, (b + 1) * per);
    assert.equal(Array.from(got), Array.from(alone.nums), `${name}: row ${b} as it would be alone`);
    assert.ok(
      Array.from(got).every((x) => !Number.isNaN(x)),
      `${name}: row ${b} read no key past its own length`,
    );
  }
}

test('attention with past_lens: each row exactly as it would be alone (decode and prefill, causal or not, masks)', () => {
  let n = 0;
  for (const [B, Sq, C, past] of [
    [3, 1, 12, [0, 5, 11]],
    [2, 4, 14, [9, 0]],
    [3, 5, 9, [2, 4, 0]],
  ] as [number, number, number, number[]][]) {
    const L = Math.max(...past) + Sq;
    for (const layout of [0, 1])
      for (const causal of [0, 1])
        for (const kind of Object.values(MASK_KIND)) {
          for (const mask of kind !== MASK_KIND.NONE
            ? [
                [B, 2, Sq, L],
                [B, 1, 1, L],
                [1, 2, Sq, 1],
              ]
            : [undefined]) {
            checkRows({ B, Sq, C, past, layout, causal, kind, mask });
            n++;
          }
        }
  }
  assert.is(n, 3 * 2 * 2 * 10);
});

test('attention with past_lens: every row at kv_len - Sq equals the call without it; other rows do not matter', () => {
  const q = f32([2, 2, 3, 4], 11),
    k = f32([2, 2, 8, 4], 12),
    v = f32([2, 2, 8, 4], 13);
  for (const causal of [0, 1]) {
    const attrs = { ...ATTRS, is_causal: causal };
    const plain = attention(attrs, [q, k, v, undefined, i64([], [7])]);
    assert.equal(
      Array.from(attention(attrs, [q, k, v, undefined, i64([], [7]), i64([2], [4, 4])]).nums),
      Array.from(plain.nums),
    );
    const a = attention(attrs, [q, k, v, undefined, i64([], [7]), i64([2], [2, 4])]);
    const b = attention(attrs, [q, k, v, undefined, i64([], [7]), i64([2], [2, 0])]);
    assert.equal(Array.from(a.nums.slice(0, 24)), Array.from(b.nums.slice(0, 24)), 'row 0 does not depend on row 1');
    assert.not.equal(Array.from(a.nums.slice(24)), Array.from(b.nums.slice(24)), 'row 1 follows its own length');
    assert.equal(Array.from(a.nums.slice(24)), Array.from(plain.nums.slice(24)), 'row 1 at the longest length');
  }
  // A hand value: one head, D 1, scale 1; row 0 (past 0) sees key 0 only, row 1 (past 1) keys 0 and 1 (weights 1/4, 3/4).
  const y = attention({ ...ATTRS, num_heads: 1, scale: 1 }, [
    Tensor.fromNumbers('float32', [2, 1, 1, 1], [1, 1]),
    Tensor.fromNumbers('float32', [2, 1, 3, 1], [0, NaN, NaN, 0, Math.log(3), NaN]),
    Tensor.fromNumbers('float32', [2, 1, 3, 1], [4, NaN, NaN, 4, 8, NaN]),
    undefined,
    i64([], [2]),
    i64([2], [0, 1]),
  ]);
  assert.is(y.nums[0], 4);
  assert.ok(Math.abs(y.nums[1]! - 7) < 1e-6, `row 1: ${y.nums[1]}`);
});

test('attention with past_lens: named errors for bad values, dims and dtype', () => {
  const q = f32([2, 2, 3, 4], 1),
    k = f32([2, 2, 8, 4], 2),
    v = f32([2, 2, 8, 4], 3);
  const run =
    (past: Tensor, kvLen = 6) =>
    () =>
      attention(ATTRS, [q, k, v, undefined, i64([], [kvLen]), past]);
  assert.not.throws(run(i64([2], [3, 0])));
  assert.throws(run(i64([2], [-1, 0])), /past_lens\[0\] = -1: past_lens\[b\] \+ Sq must be in 1\.\.kv_len 6/);
  assert.throws(run(i64([2], [0, 4])), /past_lens\[1\] = 4: past_lens\[b\] \+ Sq must be in 1\.\.kv_len 6/);
  assert.throws(run(i64([3], [0, 0, 0])), /past_lens must be \[2\] \(B\), got \[3\]/);
  assert.throws(run(i64([1, 2], [0, 0])), /past_lens must be \[2\] \(B\), got \[1, 2\]/);
  assert.throws(run(Tensor.fromNumbers('int32', [2], [0, 0])), /past_lens must be int64, got int32/);
  assert.throws(run(i64([2], [0, 0]), 9), /kv_len 9 is outside \[1, 8\]/);
  // inference: dtype and [B]
  const facts = (past: InferInput): InferInput[] => [
    { dtype: 'float32', shape: [2, 2, 3, 4] },
    { dtype: 'float32', shape: [2, 2, 8, 4] },
    { dtype: 'float32', shape: [2, 2, 8, 4] },
    undefined as unknown as InferInput,
    { dtype: 'int64', shape: [] },
    past,
  ];
  const n = node('Attention', ['q', 'k', 'v', '', 'kv_len', 'past_lens'], ATTRS);
  assert.equal(ATTENTION.infer(context(n), facts({ dtype: 'int64', shape: [2] }))[0], {
    dtype: 'float32',
    shape: [2, 2, 3, 4],
  });
  assert.throws(
    () => ATTENTION.infer(context(n), facts({ dtype: 'int32', shape: [2] })),
    /past_lens must be int64 \[B\]/,
  );
  assert.throws(
    () => ATTENTION.infer(context(n), facts({ dtype: 'int64', shape: [3] })),
    /past_lens must be \[B\] = \[2\], got \[3\]/,
  );
  // a symbolic batch: past_lens [batch] agrees, [rows] does not
  const batch = sym('batch');
  const symFacts = (past: Dim[]): InferInput[] => [
    { dtype: 'float32', shape: [batch, 2, 3, 4] },
    { dtype: 'float32', shape: [batch, 2, 8, 4] },
    { dtype: 'float32', shape: [batch, 2, 8, 4] },
    undefined as unknown as InferInput,
    { dtype: 'int64', shape: [] },
    { dtype: 'int64', shape: past },
  ];
  assert.not.throws(() => ATTENTION.infer(context(n), symFacts([batch])));
  assert.throws(
    () => ATTENTION.infer(context(n), symFacts([sym('rows')])),
    /past_lens must be \[B\] = \[batch\], got \[rows\]/,
  );
});

test('cache_write with past_lens: row b written at past_lens[b] (pos unused), bad values named', () => {
  const [B, H, C, D] = [3, 2, 6, 2];
  const cache = f32([B, H, C, D], 7);
  for (const layout of [0, 1]) {
    const Sn = 2;
    const rows = f32(layout === 0 ? [B, H, Sn, D] : [B, Sn, H * D], 8);
    const past = [0, 3, 4];
    const n = node('CacheWrite', ['cache', 'new', 'pos', 'past_lens'], { new_layout: layout, num_heads: H });
    const y = CACHE_WRITE.eval(context(n), [cache, rows, i64([], [-9]), i64([B], past)])[0]!;
    const want = Float32Array.from(cache.nums);
    for (let b = 0; b < B; b++)
      for (let h = 0; h < H; h++)
        for (let t = 0; t < Sn; t++)
          for (let d = 0; d < D; d++) {
            const from = layout === 0 ? ((b * H + h) * Sn + t) * D + d : (b * Sn + t) * H * D + h * D + d;
            want[((b * H + h) * C + past[b]! + t) * D + d] = rows.nums[from]!;
          }
    assert.equal(Array.from(y.nums), Array.from(want), `layout ${layout}`);
    // The same as one write per row at pos = past_lens[b].
    for (let b = 0; b < B; b++) {
      const alone = CACHE_WRITE.eval(context(n), [row(cache, b), row(rows, b), i64([], [past[b]!])])[0]!;
      assert.equal(Array.from(row(y, b).nums), Array.from(alone.nums), `layout ${layout} row ${b}`);
    }
    const bad = (p: Tensor) => () => CACHE_WRITE.eval(context(n), [cache, rows, i64([], [0]), p]);
    assert.throws(
      bad(i64([B], [0, 5, 0])),
      /past_lens\[1\] = 5: its first row written must be in 0\.\.4 \(capacity 6, 2 rows\)/,
    );
    assert.throws(bad(i64([B], [0, 0, -1])), /past_lens\[2\] = -1/);
    assert.throws(bad(i64([2], [0, 0])), /past_lens must be \[3\] \(B\), got \[2\]/);
    assert.throws(bad(Tensor.fromNumbers('float32', [B], [0, 0, 0])), /past_lens must be int64/);
  }
  const n = node('CacheWrite', ['cache', 'new', 'pos', 'past_lens'], { new_layout: 0, num_heads: H });
  const facts = (past: InferInput): InferInput[] => [
    { dtype: 'float32', shape: [B, H, C, D] },
    { dtype: 'float32', shape: [B, H, 1, D] },
    { dtype: 'int64', shape: [] },
    past,
  ];
  assert.not.throws(() => CACHE_WRITE.infer(context(n), facts({ dtype: 'int64', shape: [B] })));
  assert.throws(
    () => CACHE_WRITE.infer(context(n), facts({ dtype: 'int64', shape: [B + 1] })),
    /past_lens must be \[B\]/,
  );
  assert.throws(
    () => CACHE_WRITE.infer(context(n), facts({ dtype: 'float32', shape: [B] })),
    /past_lens must be int64/,
  );
});

// ---- lowering ----

function cpuCtx(n: Node, inputs: (InferInput | undefined)[]): CpuRuleCtx {
  return {
    ...context(n),
    inputs,
    outputs: [{ dtype: 'float32' }],
    shape: (i) => inputs[i]!.shape!,
    known: (i) => {
      const f = inputs[i];
      if (!f?.value) throw new Error(`input ${i} must be known`);
      return Array.from(f.value.nums);
    },
  };
}

test('CPU lowering: past_lens is kernel input 4 of attention, 2 of cache_write, only when given', () => {
  const qkv: InferInput[] = [
    { dtype: 'float32', shape: [2, 2, 1, 4] },
    { dtype: 'float32', shape: [2, 2, 8, 4] },
    { dtype: 'float32', shape: [2, 2, 8, 4] },
  ];
  const kvLen: InferInput = { dtype: 'int64', shape: [], value: i64([], [6]) };
  const attn = (names: string[], ins: (InferInput | undefined)[]) =>
    CPU_RULES['planc.Attention']!(cpuCtx(node('Attention', names, ATTRS), ins));
  const without = attn(['q', 'k', 'v', '', 'kv_len'], [...qkv, undefined, kvLen]);
  assert.equal('inputs' in without && without.inputs, [0, 1, 2, -1]);
  const withPast = attn(
    ['q', 'k', 'v', '', 'kv_len', 'past_lens'],
    [...qkv, undefined, kvLen, { dtype: 'int64', shape: [2] }],
  );
  assert.equal('inputs' in withPast && withPast.inputs, [0, 1, 2, -1, 5]);
  assert.equal('iargs' in withPast && withPast.iargs[iargIndex('attention', 'kv_len')], 6);
  assert.throws(
    () => attn(['q', 'k', 'v', '', 'kv_len', 'past_lens'], [...qkv, undefined, kvLen, { dtype: 'int32', shape: [2] }]),
    /input 5 has dtype int32/,
  );

  const cw = (names: string[], ins: (InferInput | undefined)[]) =>
    CPU_RULES['planc.CacheWrite']!(cpuCtx(node('CacheWrite', names, { new_layout: 0, num_heads: 2 }), ins));
  const cache: InferInput[] = [
    { dtype: 'float32', shape: [2, 2, 8, 4] },
    { dtype: 'float32', shape: [2, 2, 1, 4] },
  ];
  const pos: InferInput = { dtype: 'int64', shape: [], value: i64([], [3]) };
  const plain = cw(['cache', 'new', 'pos'], [...cache, pos]);
  assert.equal('inputs' in plain && [plain.inputs, plain.iargs], [
    [0, 1],
    [3, 0, 2],
  ]);
  const rows = cw(['cache', 'new', 'pos', 'past_lens'], [...cache, pos, { dtype: 'int64', shape: [2] }]);
  assert.equal('inputs' in rows && [rows.inputs, rows.iargs], [
    [0, 1, 3],
    [3, 0, 2],
  ]);
  // with past_lens, pos need not be known before running
  const runtimePos = cw(
    ['cache', 'new', 'pos', 'past_lens'],
    [...cache, { dtype: 'int64', shape: [] }, { dtype: 'int64', shape: [2] }],
  );
  assert.equal('inputs' in runtimePos && runtimePos.inputs, [0, 1, 3]);
});

const operand = (dtype: string, dims: number[]): Operand => ({
  tensor: 0,
  dtype: DTYPE_CODE[dtype as 'float32']!,
  rank: dims.length,
  dims,
  exprs: dims.map((_, i) => i),
  slotBytes: 0,
  kind: 0,
});

function cudaCtx(ins: (Operand | undefined)[], iargs: Record<string, number>): CudaRuleCtx {
  return {
    kernel: {} as CudaRuleCtx['kernel'],
    ins,
    outs: [ins[0]!],
    arch: {} as CudaRuleCtx['arch'],
    iarg: (name: string) => iargs[name]!,
    hasIarg: (name: string) => name in iargs,
    fail: (m: string) => {
      throw new Error(m);
    },
  } as CudaRuleCtx;
}

test('CUDA lowering: the PAST template argument only with past_lens (int64 [B])', () => {
  const qkv = [operand('float32', [2, 2, 1, 32]), operand('float32', [2, 2, 8, 32]), operand('float32', [2, 2, 8, 32])];
  const ia = { num_heads: 2, q_layout: 0, kv_len: 6, mask_kind: MASK_KIND.NONE, is_causal: 1 };
  const attn = CUDA_RULES.attention!;
  assert.is(attn(cudaCtx([...qkv, undefined], ia))[0]!.template, 'planc::attention<32, 0, 0, true>');
  assert.is(
    attn(cudaCtx([...qkv, undefined, operand('int64', [2])], ia))[0]!.template,
    'planc::attention<32, 0, 0, true, true>',
  );
  assert.throws(() => attn(cudaCtx([...qkv, undefined, operand('int32', [2])], ia)), /past_lens is int32/);
  assert.throws(() => attn(cudaCtx([...qkv, undefined, operand('int64', [2, 1])], ia)), /past_lens has rank 2/);
  const cw = CUDA_RULES.cache_write!;
  const c = [operand('float32', [2, 2, 8, 32]), operand('float32', [2, 2, 1, 32])];
  const ci = { pos: 0, new_layout: 0, num_heads: 2 };
  assert.is(cw(cudaCtx(c, ci))[0]!.template, 'planc::cache_write<0>');
  assert.is(cw(cudaCtx([...c, operand('int64', [2])], ci))[0]!.template, 'planc::cache_write<0, true>');
  assert.throws(() => cw(cudaCtx([...c, operand('float32', [2])], ci)), /past_lens is float32/);
});

// ---- the CUDA templates on the emulated device ----

const hasGxx = spawnSync('g++', ['--version']).status === 0;
const simTest = testIf(
  test,
  (!hasGxx || process.arch !== 'x64') && 'need g++ on x86-64 (the emulated CUDA device compiles kernels for the CPU)',
);

simTest(
  'CUDA attention and cache_write with past_lens on cudasim: rows bit for bit as alone, bad values flagged',
  () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-rows-sim-'));
    try {
      const sh = (cmd: string, args: string[]) => {
        const r = spawnSync(cmd, args, { encoding: 'utf8' });
        if (r.status !== 0) throw new Error(`${cmd} ${args[0]}: ${r.status} ${r.stderr.slice(0, 3000)}`);
        return r.stdout;
      };
      const cc = path.join(dir, 'cudasimcc');
      sh('g++', [
        '-std=c++17',
        '-O1',
        `-DCUDASIM_DIR="${CUDASIM_DIR}"`,
        path.join(CUDASIM_DIR, 'cudasimcc.cc'),
        path.join(CUDASIM_DIR, 'compile.cc'),
        '-o',
        cc,
      ]);
      const cu = path.join(dir, 'rows.cu');
      fs.writeFileSync(
        cu,
        `${templateSource()}\n${fs.readFileSync(path.join(REPO_ROOT, 'test', 'native', 'row-past-lengths-sim.cu'), 'utf8')}`,
      );
      sh(cc, [cu, path.join(dir, 'rows.cc')]);
      const exe = path.join(dir, 'rows');
      sh('g++', [
        '-std=c++17',
        '-O1',
        '-w',
        '-I',
        path.join(CUDASIM_DIR, 'include'),
        '-I',
        CUDASIM_DIR,
        '-I',
        path.join(CUDASIM_DIR, 'test'),
        '-include',
        'cudasim.h',
        '-rdynamic',
        '-x',
        'c++',
        path.join(dir, 'rows.cc'),
        '-o',
        exe,
        '-ldl',
      ]);
      const r = spawnSync(exe, [], { encoding: 'utf8' });
      const lines = r.stdout.split('\n');
      const failed = lines.filter((l) => l.startsWith('FAIL '));
      assert.equal(failed, [], failed.join('\n'));
      assert.is(r.status, 0, r.stderr);
      assert.is(lines.filter((l) => l.startsWith('ok ')).length, 23);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
);

test.run();
