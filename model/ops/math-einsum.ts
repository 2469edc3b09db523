// Einsum: equation parsing (implicit/explicit output, ellipsis, repeated labels) and a general summation loop.
import type { NumArray } from '../../compiler/dtype.ts';
import { dimStr, type Dim } from '../../compiler/symbolic.ts';
import { stridesOf } from '../../compiler/tensor.ts';
import { fromF64, requireNumeric, requireSameDtype } from './math-common.ts';
import type { OpContext, OpHandler } from './types.ts';

/** An equation resolved against input ranks: each input's per-axis labels and the output's labels. */
interface Plan {
  inputs: string[][];
  output: string[];
}

const LETTER = /^[A-Za-z]$/;

/** Splits one term into letters and '...' tokens. */
function tokens(ctx: OpContext, term: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < term.length; i++) {
    if (term.startsWith('...', i)) {
      out.push('...');
      i += 2;
      continue;
    }
    if (!LETTER.test(term[i])) ctx.fail(`invalid character '${term[i]}' in einsum equation`);
    out.push(term[i]);
  }
  if (out.filter((t) => t === '...').length > 1) ctx.fail(`term '${term}' has more than one ellipsis`);
  return out;
}

/** Resolves the equation for inputs of the given ranks. Ellipsis axes get labels '.0', '.1', ... right-aligned. */
function plan(ctx: OpContext, equation: string, ranks: readonly number[]): Plan {
  const eq = equation.replace(/\s+/g, '');
  const arrow = eq.indexOf('->');
  const lhs = arrow < 0 ? eq : eq.slice(0, arrow);
  const terms = lhs.split(',').map((t) => tokens(ctx, t));
  if (terms.length !== ranks.length)
    ctx.fail(`equation has ${terms.length} input terms but the node has ${ranks.length} inputs`);
  const ellRanks = terms.map((t, i) => {
    const letters = t.filter((x) => x !== '...').length;
    const e = ranks[i] - letters;
    if (t.includes('...') ? e < 0 : e !== 0)
      ctx.fail(`term ${i} has ${letters} labels but input ${i} has rank ${ranks[i]}`);
    return e;
  });
  const maxEll = Math.max(0, ...ellRanks);
  const ell = (from: number): string[] => Array.from({ length: maxEll - from }, (_, j) => `.${from + j}`);
  const inputs = terms.map((t, i) => t.flatMap((x) => (x === '...' ? ell(maxEll - ellRanks[i]) : [x])));
  let output: string[];
  if (arrow >= 0) {
    const o = tokens(ctx, eq.slice(arrow + 2));
    output = o.flatMap((x) => (x === '...' ? ell(0) : [x]));
    const seen = new Set<string>();
    for (const l of output) {
      if (seen.has(l)) ctx.fail(`output label '${l}' is repeated`);
      seen.add(l);
      if (!l.startsWith('.') && !inputs.some((t) => t.includes(l))) ctx.fail(`output label '${l}' is not in any input`);
    }
  } else {
    const counts = new Map<string, number>();
    for (const t of inputs) for (const l of t) if (!l.startsWith('.')) counts.set(l, (counts.get(l) ?? 0) + 1);
    const once = [...counts]
      .filter(([, c]) => c === 1)
      .map(([l]) => l)
      .sort();
    output = [...ell(0), ...once];
  }
  return { inputs, output };
}

/** Each label's size over all inputs (size-1 axes broadcast), failing on conflicts. */
function labelSizes<D extends Dim>(ctx: OpContext, p: Plan, shapes: readonly (readonly D[])[]): Map<string, D> {
  const sizes = new Map<string, D>();
  p.inputs.forEach((labels, i) =>
    labels.forEach((l, ax) => {
      const d = shapes[i][ax];
      const prev = sizes.get(l);
      if (prev === undefined || prev === 1) sizes.set(l, d);
      else if (d !== 1 && typeof d === 'number' && typeof prev === 'number' && d !== prev) {
        ctx.fail(`label '${l}' has sizes ${dimStr(prev)} and ${dimStr(d)}`);
      }
    }),
  );
  return sizes;
}

const einsum: OpHandler = {
  op: 'Einsum',
  since: 12,
  infer(ctx, inputs) {
    if (inputs.length === 0 || inputs.some((x) => x === undefined))
      ctx.fail('Einsum needs at least one input, none omitted');
    const xs = inputs.map((x) => x!);
    requireNumeric(ctx, xs[0].dtype);
    for (const x of xs) requireSameDtype(ctx, xs[0].dtype, x.dtype, 'input');
    if (xs.some((x) => x.shape === undefined)) return [{ dtype: xs[0].dtype, shape: undefined }];
    const shapes = xs.map((x) => x.shape!);
    const p = plan(
      ctx,
      ctx.string('equation'),
      shapes.map((s) => s.length),
    );
    const sizes = labelSizes(ctx, p, shapes);
    return [{ dtype: xs[0].dtype, shape: p.output.map((l) => sizes.get(l) ?? 1) }];
  },
  eval(ctx, inputs) {
    if (inputs.length === 0 || inputs.some((x) => x === undefined))
      ctx.fail('Einsum needs at least one input, none omitted');
    const xs = inputs.map((x) => x!);
    requireNumeric(ctx, xs[0].dtype);
    for (const x of xs) requireSameDtype(ctx, xs[0].dtype, x.dtype, 'input');
    const p = plan(
      ctx,
      ctx.string('equation'),
      xs.map((x) => x.rank),
    );
    const sizes = labelSizes(
      ctx,
      p,
      xs.map((x) => x.dims),
    );
    const outDims = p.output.map((l) => sizes.get(l) ?? 1);
    const summed = [...sizes.keys()].filter((l) => !p.output.includes(l));
    const labels = [...p.output, ...summed];
    const size = labels.map((l) => sizes.get(l) ?? 1);
    const outStrides = stridesOf(outDims);
    const ost = labels.map((_, i) => (i < p.output.length ? outStrides[i] : 0));
    // Per input, the stride each label steps (repeated labels add up: a diagonal; broadcast axes step 0).
    const ist = xs.map((x, t) => {
      const st = stridesOf(x.dims);
      return labels.map((l) =>
        p.inputs[t].reduce((acc, lab, ax) => (lab === l && x.dims[ax] !== 1 ? acc + st[ax] : acc), 0),
      );
    });
    const out = new Float64Array(outDims.reduce((a, b) => a * b, 1));
    const total = size.reduce((a, b) => a * b, 1);
    if (total > 0)
      sumProducts(
        xs.map((x) => x.nums),
        size,
        ist,
        ost,
        total,
        out,
      );
    return [fromF64(xs[0].dtype, outDims, out)];
  },
};

/** out[o] += Π inputs over the odometer of every label (output labels first, then summed ones). */
function sumProducts(
  data: NumArray[],
  size: number[],
  ist: number[][],
  ost: number[],
  total: number,
  out: Float64Array,
): void {
  const nl = size.length,
    ni = data.length;
  const ctr = new Array<number>(nl).fill(0);
  const off = new Array<number>(ni).fill(0);
  let o = 0;
  for (let it = 0; it < total; it++) {
    let prod = 1;
    for (let t = 0; t < ni; t++) prod *= data[t][off[t]];
    out[o] += prod;
    for (let l = nl - 1; l >= 0; l--) {
      ctr[l]++;
      for (let t = 0; t < ni; t++) off[t] += ist[t][l];
      o += ost[l];
      if (ctr[l] < size[l]) break;
      for (let t = 0; t < ni; t++) off[t] -= ist[t][l] * size[l];
      o -= ost[l] * size[l];
      ctr[l] = 0;
    }
  }
}

export const EINSUM_OPS: OpHandler[] = [einsum];
