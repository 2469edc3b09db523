// qmatmul and qproject_topk through real programs (test/reference/call-program.ts: a PlanProgram encoded by
// runtime/encode-program.ts, weights in a plan blob, the native loader): every variant this machine runs against
// compiler/quant/pack.ts's references (bit for bit for int8 and int16 inputs) and the float32 product within the bound.
import * as fs from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type ACTIVATIONS, QUANT_INPUTS } from '../compiler/kernel-enums.ts';
import { QGEMM_VARIANTS, call, type KernelCall } from '../compiler/kernel-schema.ts';
import {
  fineAt,
  fineLogit,
  qlogitsRef,
  qmatmulRef,
  quantizeChannels,
  quantizeInputRow,
  quantizeRows,
  RESIDUAL_STEPS,
  type QuantInput,
} from '../compiler/quant/pack.ts';
import { nativeAvailable, nativeInfo } from '../runtime/native.ts';
import { callProgram, type Operand, type Typed } from './reference/call-program.ts';
import { NEEDS_NATIVE, skipPart, testIf } from './helpers/skip.ts';

const it = testIf(test, !nativeAvailable() && NEEDS_NATIVE);
const fr = Math.fround;

/** The addon's own word on which variants this machine runs (nativeInfo().variants), never a message's wording. */
const INFO = nativeAvailable() ? nativeInfo() : undefined;
/** Why this machine does not run `variant` of `kernel`, or undefined when the addon lists it as runnable (or the kernel has one implementation). */
function unavailable(kernel: string, variant: string): string | undefined {
  const runs = INFO!.variants[kernel];
  if (runs === undefined || runs.includes(variant)) return undefined;
  return INFO!.variantsUnavailable[kernel]?.[variant] ?? `nativeInfo lists no variant ${variant} of ${kernel}`;
}
const refusalChecked = new Set<string>();

/**
 * Runs one call of `kernel` (variant by name); returns its outputs, or, for a variant the addon says this machine does
 * not run, its reason (the loader's refusal of such a program is checked once per kernel and variant).
 */
function runCall(variant: string, ins: (Operand | null)[], outs: Operand[], c: KernelCall): Typed[] | string {
  const kernel = c.kernel;
  const why = unavailable(kernel, variant);
  if (why !== undefined) {
    if (!refusalChecked.has(`${kernel} ${variant}`)) {
      refusalChecked.add(`${kernel} ${variant}`);
      assert.throws(
        () => callProgram([{ call: c, variant, ins, outs }]).free(),
        (e: unknown) => (e as Error).message.includes(why),
        `${kernel} variant ${variant}: the loader refuses it with the reason nativeInfo gives (${why})`,
      );
    }
    return why;
  }
  const prog = callProgram([{ call: c, variant, ins, outs }]);
  try {
    return prog.run();
  } finally {
    prog.free();
  }
}

/** Deterministic values in [-scale, scale). */
function values(n: number, seed: number, scale: number): Float32Array {
  let s = (seed * 2654435761) % 4294967296 || 1;
  return Float32Array.from({ length: n }, () => {
    s = (s * 1664525 + 1013904223) % 4294967296;
    return fr(((s / 4294967296) * 2 - 1) * scale);
  });
}

const VARIANTS = QGEMM_VARIANTS.map((v) => v.name);

/** The CPU flags of /proc/cpuinfo (none where there is no such file). */
const CPU_FLAGS = fs.existsSync('/proc/cpuinfo')
  ? (/^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.split(/\s+/) ?? [])
  : [];

/**
 * The variants this machine does not run in a test, each with its reason: counted as skipped parts at the end of the
 * test. On a CPU that lists AMX-INT8 and AVX-512 VNNI the addon must see AMX (its level is amx), and amx may be left
 * out only under a PLANC_ISA cap, by a build without AMX or by Linux refusing the tile state.
 */
function reportRefused(refused: Map<string, string>, what: string): void {
  const amxHere =
    process.arch === 'x64' && ['amx_tile', 'amx_int8', 'avx512_vnni', 'avx512bw'].every((f) => CPU_FLAGS.includes(f));
  if (amxHere) assert.is(INFO!.isa.machine, 'amx', "the CPU lists AMX-INT8: the addon's machine level");
  const amx = refused.get('amx');
  if (amxHere && INFO!.isa.effective === 'amx' && amx !== undefined)
    assert.match(amx, /kernel refused|build has no AMX/, `amx refused on an AMX CPU: ${amx}`);
  for (const [variant, why] of refused) skipPart(`this machine does not run variant ${variant} (${why})`, what);
}

/** The activation in double, rounded once (the kernels' epilogue; gelu's erf is left to the C++ test). */
function activate(v: number, name: string): number {
  if (name === 'relu') return v > 0 ? v : 0;
  if (name === 'gelu_tanh') return fr(0.5 * v * (1 + Math.tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v))));
  if (name === 'silu') return fr(v / (1 + Math.exp(-v)));
  return v;
}

interface MatCase {
  m: number;
  k: number;
  n: number;
  input: QuantInput;
  act: (typeof ACTIVATIONS)[number];
  bias: boolean;
  res: boolean;
  sum: boolean;
}

function runQmatmul(
  c: MatCase,
  variant: string,
  a: Float32Array,
  w: Float32Array,
  bias: Float32Array,
  res: Float32Array,
) {
  const pk = quantizeChannels(w, c.k, c.n, c.input === 'int16' ? 16 : 8);
  const wt = (dtype: Operand['dtype'], dims: number[], data: Typed): Operand => ({ role: 'weight', dtype, dims, data });
  const out = runCall(
    variant,
    [
      { role: 'feed', dtype: 'float32', dims: [c.m, c.k], data: a },
      wt(pk.q instanceof Int16Array ? 'int16' : 'int8', pk.dims, pk.q),
      wt('float32', [c.n], pk.scale),
      c.sum ? wt('int32', [c.n], pk.sum) : null,
      c.bias ? wt('float32', [c.n], bias) : null,
      c.res ? { role: 'feed', dtype: 'float32', dims: [c.m, c.n], data: res } : null,
    ],
    [{ role: 'out', dtype: 'float32', dims: [c.m, c.n], data: new Float32Array(c.m * c.n) }],
    call('qmatmul', { activation: c.act, input: c.input, n: c.n, k: c.k }),
  );
  return { out, pk };
}

it('qmatmul: every variant this machine runs equals the reference (bit for bit for int8 and int16 inputs)', () => {
  const ran = new Set<string>();
  const refused = new Map<string, string>();
  let cases = 0;
  for (const input of QUANT_INPUTS) {
    // amx: delegated rows (1, 5), partial and full row tiles, partial and several k-tiles
    for (const [m, k, n] of [
      [1, 7, 1],
      [1, 513, 50],
      [5, 33, 17],
      [16, 64, 17],
      [17, 513, 50],
      [64, 33, 50],
      [130, 7, 17],
    ] as const) {
      for (const opts of [
        { act: 'none', bias: false, res: false, sum: true },
        { act: 'relu', bias: true, res: true, sum: false },
        { act: 'silu', bias: true, res: false, sum: true },
        { act: 'gelu_tanh', bias: false, res: true, sum: true },
      ] as const) {
        const c: MatCase = { m, k, n, input, ...opts };
        const a = values(m * k, m + k, 2),
          w = values(k * n, k * n + 1, 0.5),
          bias = values(n, 3, 1),
          res = values(m * n, 4, 1);
        const ref = qmatmulRef({
          a,
          m,
          k,
          n,
          input,
          w: quantizeChannels(w, k, n, input === 'int16' ? 16 : 8).q,
          scale: quantizeChannels(w, k, n, input === 'int16' ? 16 : 8).scale,
          bias: c.bias ? bias : undefined,
        });
        const want = ref.map((v, i) => {
          const y = activate(v, c.act);
          return c.res ? fr(y + res[i]!) : y;
        });
        const exact = input !== 'float32' && (c.act === 'none' || c.act === 'relu');
        for (const variant of VARIANTS) {
          const { out } = runQmatmul(c, variant, a, w, bias, res);
          if (typeof out === 'string') {
            refused.set(variant, out);
            continue;
          }
          ran.add(variant);
          cases++;
          const y = out[0] as Float32Array;
          for (let i = 0; i < y.length; i++) {
            const ok = exact
              ? Object.is(y[i], want[i])
              : Math.abs(y[i]! - want[i]!) <=
                2e-5 * (1 + Math.abs(want[i]!)) * (input === 'float32' ? Math.sqrt(k) : 1);
            if (!ok) assert.unreachable(`qmatmul ${variant} ${JSON.stringify(c)} [${i}]: got ${y[i]}, want ${want[i]}`);
          }
        }
      }
    }
  }
  assert.ok(ran.has('auto') && ran.has('ref'), `auto and ref run everywhere; ran ${[...ran]}`);
  assert.ok(cases > 100);
  reportRefused(refused, 'its qmatmul comparisons (quant-kernels)');
});

it('qmatmul: within the quantization bound of the float32 product', () => {
  for (const input of QUANT_INPUTS) {
    const m = 4,
      k = 300,
      n = 40;
    const a = values(m * k, 7, 3),
      w = values(k * n, 8, 0.25);
    const c: MatCase = { m, k, n, input, act: 'none', bias: false, res: false, sum: true };
    const { out, pk } = runQmatmul(c, 'auto', a, w, new Float32Array(n), new Float32Array(m * n));
    const y = (out as Typed[])[0] as Float32Array;
    let worst = 0;
    for (let i = 0; i < m; i++) {
      const row = a.subarray(i * k, (i + 1) * k);
      const sa = input === 'float32' ? 0 : quantizeInputRow(row, input).scale;
      for (let j = 0; j < n; j++) {
        // x·w − xq·wq = x·(w − wq) + (x − xq)·wq, |w − wq| ≤ sw/2, |x − xq| ≤ sa/2, |wq| ≤ |w| + sw/2; plus float32 rounding.
        const sw = pk.scale[j]!;
        let exact = 0,
          bound = 0;
        for (let t = 0; t < k; t++) {
          const x = row[t]!,
            wv = w[t * n + j]!;
          exact += x * wv;
          bound += (Math.abs(x) * sw) / 2 + (sa / 2) * (Math.abs(wv) + sw / 2) + 1e-6 * Math.abs(x * wv);
        }
        const err = Math.abs(y[i * n + j]! - exact);
        assert.ok(err <= bound, `${input} [${i}, ${j}]: |${y[i * n + j]} - ${exact}| = ${err} > ${bound}`);
        worst = Math.max(worst, err / bound);
      }
    }
    assert.ok(worst > 0.001, `${input}: the error is real (worst ${worst} of the bound)`);
  }
});

it('qmatmul: a wrong w layout is refused with the expected dims', () => {
  const w = quantizeChannels(values(8 * 20, 1, 1), 8, 20, 8);
  assert.equal(w.dims, [2, 2, 16, 4]);
  assert.throws(
    () =>
      runCall(
        'auto',
        [
          { role: 'feed', dtype: 'float32', dims: [2, 8], data: values(16, 2, 1) },
          { role: 'weight', dtype: 'int8', dims: [2, 3, 16, 4], data: new Int8Array(384) },
          { role: 'weight', dtype: 'float32', dims: [20], data: w.scale },
          null,
          null,
          null,
        ],
        [{ role: 'out', dtype: 'float32', dims: [2, 20], data: new Float32Array(40) }],
        call('qmatmul', { activation: 'none', input: 'int8', n: 20, k: 8 }),
      ),
    /w must be int8 \[2, 2, 16, 4\]/,
  );
});

/** The reference top-k: log_softmax over the active ids of logits (double), best first, ties to the lower id. */
function topkRef(logits: Float32Array, v: number, rows: number, k: number, active?: Uint8Array) {
  const vals: number[] = [],
    ids: number[] = [];
  for (let r = 0; r < rows; r++) {
    const l: [number, number][] = [];
    for (let j = 0; j < v; j++) if (!active || active[j]) l.push([logits[r * v + j]!, j]);
    const mx = Math.max(...l.map((e) => e[0]));
    const lse = mx + Math.log(l.reduce((s, e) => s + Math.exp(e[0] - mx), 0));
    l.sort((x, y) => y[0] - x[0] || x[1] - y[1]);
    for (let t = 0; t < k; t++) {
      vals.push(t < l.length ? l[t]![0] - lse : -Infinity);
      ids.push(t < l.length ? l[t]![1] : 0);
    }
  }
  return { vals, ids };
}

/** qproject_topk over pk (with its residual plane when asked) on one variant: its outputs, or the refusal of a variant this machine cannot run. */
function projectTopk(
  variant: string,
  pk: ReturnType<typeof quantizeRows>,
  x: Float32Array,
  rows: number,
  d: number,
  k: number,
  input: QuantInput,
  bias: Float32Array | undefined,
  residual: boolean,
  mask?: Uint8Array,
): Typed[] | string {
  const v = pk.dims[0]!;
  return runCall(
    variant,
    [
      { role: 'feed', dtype: 'float32', dims: [rows, d], data: x },
      { role: 'weight', dtype: 'int8', dims: pk.dims, data: pk.q },
      { role: 'weight', dtype: 'float32', dims: [v], data: pk.scale },
      { role: 'weight', dtype: 'int32', dims: [v], data: pk.sum },
      bias ? { role: 'weight', dtype: 'float32', dims: [v], data: bias } : null,
      mask ? { role: 'feed', dtype: 'uint8', dims: [v], data: mask } : null,
      ...(residual ? [{ role: 'weight', dtype: 'uint8', dims: [v, pk.dims[1]! / 2], data: pk.res! } as Operand] : []),
    ],
    [
      { role: 'out', dtype: 'float32', dims: [rows, k], data: new Float32Array(rows * k) },
      { role: 'out', dtype: 'int64', dims: [rows, k], data: new BigInt64Array(rows * k) },
    ],
    call('qproject_topk', { k, input, d }),
  );
}

/** The values and ids of projectTopk's outputs. */
const topkOut = (out: Typed[]) => ({ vals: out[0] as Float32Array, ids: Array.from(out[1] as BigInt64Array, Number) });

it('qproject_topk: every variant equals the reference (ids, and log-probs bit for bit across int8 paths)', () => {
  const v = 300,
    d = 100,
    k = 8;
  const w = values(v * d, 11, 0.3),
    bias = values(v, 12, 1);
  const pk = quantizeRows(w, v, d);
  const active = Uint8Array.from({ length: v }, (_, j) => (j % 3 === 1 || j === 7 ? 1 : 0));
  let ran = 0;
  const refused = new Map<string, string>();
  for (const input of ['int8', 'float32'] as const) {
    for (const rows of [1, 16, 33]) {
      const x = values(rows * d, rows + 13, 2);
      for (const withBias of [false, true]) {
        for (const mask of [undefined, active]) {
          const logits = qlogitsRef({ x, rows, d, v, input, w: pk.q as Int8Array, scale: pk.scale });
          if (withBias) for (let i = 0; i < logits.length; i++) logits[i] = fr(logits[i]! + bias[i % v]!);
          const want = topkRef(logits, v, rows, k, mask);
          let first: Float32Array | undefined;
          for (const variant of VARIANTS) {
            const out = projectTopk(variant, pk, x, rows, d, k, input, withBias ? bias : undefined, false, mask);
            if (typeof out === 'string') {
              refused.set(variant, out);
              continue;
            }
            ran++;
            const { vals, ids } = topkOut(out);
            const what = `${variant} ${input} rows ${rows} bias ${withBias} active ${!!mask}`;
            assert.equal(ids, want.ids, `${what}: ids`);
            vals.forEach((g, i) =>
              assert.ok(
                Math.abs(g - want.vals[i]!) <= 1e-5 * (1 + Math.abs(want.vals[i]!)),
                `${what} [${i}]: ${g} vs ${want.vals[i]}`,
              ),
            );
            if (input === 'int8') {
              if (!first) first = vals;
              else assert.equal(Array.from(vals), Array.from(first), `${what}: log-probs equal across paths`);
            }
          }
        }
      }
    }
  }
  assert.ok(ran >= 16);
  reportRefused(refused, 'its qproject_topk comparisons (quant-kernels)');
});

it('residual plane: 12-bit rows within s/30 of the float32 table', () => {
  const v = 50,
    d = 70;
  const w = values(v * d, 21, 0.4);
  const pk = quantizeRows(w, v, d),
    dp = pk.dims[1]!;
  assert.equal(pk.res!.length, (v * dp) / 2);
  let worst = 0;
  for (let j = 0; j < v; j++) {
    const s = pk.scale[j]!;
    for (let p = 0; p < d; p++) {
      const err = Math.abs((fineAt(pk.q, pk.res!, dp, j, p) * s) / RESIDUAL_STEPS - w[j * d + p]!) / s;
      worst = Math.max(worst, err);
    }
  }
  assert.ok(worst <= 1 / 30 + 1e-6, `worst error ${worst} steps`);
  assert.ok(worst > 1 / 40, `worst error ${worst} steps: the rows are not exact (the bound is tight)`);
});

it('qproject_topk with w_res: every variant rescores its best ids from the 12-bit rows (fine logits, corrected normalizer)', () => {
  const v = 400,
    d = 96,
    k = 4,
    rows = 9;
  // pairs of nearly equal rows: int8 alone often ranks a pair wrongly, the 12-bit rows rarely
  const base = values((v / 2) * d, 31, 0.3),
    noise = values(v * d, 32, 0.002);
  const w = Float32Array.from({ length: v * d }, (_, i) => fr(base[Math.floor(i / d / 2) * d + (i % d)]! + noise[i]!));
  const bias = values(v, 33, 0.01),
    x = values(rows * d, 34, 3);
  const pk = quantizeRows(w, v, d),
    dp = pk.dims[1]!;
  const exact = (r: number, j: number) => {
    let s = 0;
    for (let p = 0; p < d; p++) s += x[r * d + p]! * w[j * d + p]!;
    return s + bias[j]!;
  };
  let ran = 0,
    int8Wrong = 0;
  const refused = new Map<string, string>();
  for (const input of ['int8', 'float32'] as const) {
    // the reference: the max(k, 8) best by the int8 logits, their fine logits, the normalizer corrected by them
    const approx = qlogitsRef({ x, rows, d, v, input, w: pk.q as Int8Array, scale: pk.scale }).map((l, i) =>
      fr(l + bias[i % v]!),
    );
    const want: { ids: number[]; vals: number[] }[] = [];
    for (let r = 0; r < rows; r++) {
      const row = Array.from(approx.subarray(r * v, (r + 1) * v));
      const mx = Math.max(...row),
        lse = mx + Math.log(row.reduce((s, l) => s + Math.exp(l - mx), 0));
      const best = row
        .map((l, j) => [l, j] as const)
        .sort((a, b) => b[0] - a[0] || a[1] - b[1])
        .slice(0, 8)
        .map((e) => e[1]);
      let mass = 1;
      const fine = best.map((j) => {
        const l = fineLogit(x.subarray(r * d), d, pk.q, pk.res!, dp, pk.scale, j, bias);
        mass += Math.exp(l - lse) - Math.exp(row[j]! - lse);
        return [l, j] as const;
      });
      fine.sort((a, b) => b[0] - a[0] || a[1] - b[1]);
      want.push({
        ids: fine.slice(0, k).map((e) => e[1]),
        vals: fine.slice(0, k).map((e) => e[0] - lse - Math.log(mass)),
      });
      const top = (ids: number[]) => ids[0];
      const exactTop = Array.from({ length: v }, (_, j) => j).reduce((a, b) => (exact(r, b) > exact(r, a) ? b : a), 0);
      assert.equal(top(want[r]!.ids), exactTop, `${input} row ${r}: the rescored best id is the float32 one`);
      if (best[0] !== exactTop) int8Wrong++;
    }
    for (const variant of VARIANTS) {
      const out = projectTopk(variant, pk, x, rows, d, k, input, bias, true);
      if (typeof out === 'string') {
        refused.set(variant, out);
        continue;
      }
      const got = topkOut(out);
      ran++;
      for (let r = 0; r < rows; r++) {
        assert.equal(got.ids.slice(r * k, r * k + k), want[r]!.ids, `${variant} ${input} row ${r}: ids`);
        for (let t = 0; t < k; t++) {
          const g = got.vals[r * k + t]!,
            e = want[r]!.vals[t]!;
          assert.ok(Math.abs(g - e) <= 1e-5 * (1 + Math.abs(e)), `${variant} ${input} row ${r} [${t}]: ${g} vs ${e}`);
        }
      }
      const plain = topkOut(projectTopk(variant, pk, x, rows, d, k, input, bias, false) as Typed[]);
      assert.ok(
        plain.ids.some((id, i) => id !== got.ids[i]),
        `${variant} ${input}: without w_res some ids differ (the test can fail)`,
      );
    }
  }
  assert.ok(int8Wrong >= 2, `int8 alone ranks ${int8Wrong} rows' best wrongly: the case exercises rescoring`);
  assert.ok(ran >= 2);
  reportRefused(refused, 'its rescoring comparisons (quant-kernels)');
});

it('qgather with its residual: 12-bit rows, (15 · q + r) · (s / 15), bit for bit', () => {
  const v = 30,
    d = 70;
  const w = values(v * d, 41, 0.5);
  const pk = quantizeRows(w, v, d),
    dp = pk.dims[1]!;
  const ids = BigInt64Array.from([3n, 0n, 29n, -1n, 7n]);
  const out = runCall(
    '',
    [
      { role: 'weight', dtype: 'int8', dims: pk.dims, data: pk.q },
      { role: 'weight', dtype: 'float32', dims: [v], data: pk.scale },
      { role: 'feed', dtype: 'int64', dims: [ids.length], data: ids },
      { role: 'weight', dtype: 'uint8', dims: [v, dp / 2], data: pk.res! },
    ],
    [{ role: 'out', dtype: 'float32', dims: [ids.length, d], data: new Float32Array(ids.length * d) }],
    call('qgather', { d }),
  );
  assert.ok(typeof out !== 'string');
  const y = (out as Typed[])[0] as Float32Array;
  ids.forEach((id, i) => {
    const j = Number(id) < 0 ? Number(id) + v : Number(id);
    for (let p = 0; p < d; p++) {
      const want = fr(fineAt(pk.q, pk.res!, dp, j, p) * fr(pk.scale[j]! / RESIDUAL_STEPS));
      assert.equal(y[i * d + p], want, `row ${j} [${p}]`);
      assert.ok(Math.abs(want - w[j * d + p]!) <= pk.scale[j]! / 30 + 1e-7);
    }
  });
});

test.run();
