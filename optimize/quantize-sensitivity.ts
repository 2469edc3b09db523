// Each product's sensitivity to quantization, measured: its inputs on calibration text (a float32 plan exposing them
// as outputs), then the relative error of its int8 and w8 output against float32 on those rows (the kernels' exact
// arithmetic, compiler/quant/pack.ts references).
import type { Graph, Model } from '../compiler/ir.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { qlogitsRef, qmatmulRef, quantizeChannels, quantizeRows } from '../compiler/quant/pack.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import type { ProfileOptions } from '../codegen/profile.ts';
import type { PassContext, ProgressReporter } from '../passes/pass.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { constWeight } from '../passes/quantize.ts';
import { transposeMatrix } from '../compiler/tensor.ts';
import type { DecodingRules } from '../runtime/decode/conventions.ts';
import { rowBest } from '../runtime/decode/scores.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { CALIBRATION_BATCH, greedyExposed } from './vocab-calibrate.ts';

/** Sentences decoded to collect inputs, and input rows kept per product (spread over the sentences). */
const SENTENCES = 16;
const ROWS = 96;
const PROJECTION_ROWS = 24;
/** A product whose int8 output error is over this starts in w8 under auto. */
export const INT8_ERROR_BOUND = 0.05;

export interface LayerError {
  graph: string;
  node: string;
  op: string;
  /** ‖y_q − y‖ / ‖y‖ over the sampled rows, for int8 and w8. */
  int8: number;
  w8: number;
  bound: number;
}

interface Probe {
  graph: string;
  node: string;
  op: string;
  input: string;
  w: Float32Array;
  k: number;
  n: number;
  transposed: boolean;
  bias?: Float32Array;
}

/** The products a quantize pass would rewrite (planc.FusedMatMul / ProjectTopK over a constant float32 matrix). */
function probesOf(model: Model): Probe[] {
  const out: Probe[] = [];
  for (const g of model.graphs.values()) {
    for (const n of g.nodes) {
      const key = n.domain ? `${n.domain}.${n.op}` : n.op;
      if (key === 'Gather') {
        const t = constWeight(model, g, n.inputs[0]!)?.t;
        if (t && t.size * 4 >= 1 << 20)
          out.push({
            graph: g.name,
            node: n.name,
            op: 'Gather',
            input: '',
            w: t.nums as Float32Array,
            k: t.dims[1]!,
            n: t.dims[0]!,
            transposed: true,
          });
        continue;
      }
      if (key !== 'planc.FusedMatMul' && key !== 'planc.ProjectTopK' && key !== 'MatMul') continue;
      const t = constWeight(model, g, n.inputs[1]!)?.t;
      if (!t) continue;
      const transposed = n.op === 'ProjectTopK' && n.attrs.transposed?.kind === 'int' && n.attrs.transposed.value === 1;
      const [k, cols] = (transposed ? [t.dims[1], t.dims[0]] : t.dims) as [number, number];
      const bid = n.inputs[2] ? g.initializers.get(n.inputs[2]) : undefined;
      const bias = bid ? (model.weights.get(bid)!.tensor.nums as Float32Array) : undefined;
      out.push({
        graph: g.name,
        node: n.name,
        op: key,
        input: n.inputs[0]!,
        w: t.nums as Float32Array,
        k,
        n: cols,
        transposed,
        bias: bias?.length === cols ? bias : undefined,
      });
    }
  }
  return out;
}

/** The model with every probed input also a graph output. */
function exposeInputs(model: Model, probes: Probe[]): Model {
  for (const p of probes) {
    if (!p.input) continue;
    const g: Graph = model.graphs.get(p.graph)!;
    if (!g.outputs.includes(p.input)) g.outputs.push(p.input);
  }
  return model;
}

/** Keeps up to `max` rows of [rows, k] data, spread evenly. */
function sampleRows(data: Float32Array, k: number, max: number, into: Float32Array[]): void {
  const rows = data.length / k;
  const step = Math.max(1, Math.floor(rows / Math.max(1, max)));
  for (let r = 0; r < rows && into.length < max; r += step) into.push(data.slice(r * k, r * k + k));
}

/** ‖y_q − y‖ / ‖y‖ over the rows, y = x·W + bias in float64. */
function relError(p: Probe, rows: Float32Array[], quantized: (x: Float32Array, m: number) => Float32Array): number {
  if (!rows.length) return 0;
  const m = rows.length,
    x = new Float32Array(m * p.k);
  rows.forEach((r, i) => x.set(r, i * p.k));
  const yq = quantized(x, m);
  let num = 0,
    den = 0;
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < p.n; j++) {
      let y = p.bias ? p.bias[j]! : 0;
      for (let c = 0; c < p.k; c++) y += x[i * p.k + c]! * (p.transposed ? p.w[j * p.k + c]! : p.w[c * p.n + j]!);
      const d = yq[i * p.n + j]! + (p.bias && p.op === 'planc.ProjectTopK' ? p.bias[j]! : 0) - y;
      num += d * d;
      den += y * y;
    }
  }
  return den > 0 ? Math.sqrt(num / den) : 0;
}

/** An embedding table's own error: ‖deq(quant(E)) − E‖ / ‖E‖ (rows int8, as planc.QGather reads them). */
function tableError(p: Probe): number {
  const q = quantizeRows(p.w, p.n, p.k);
  const dp = q.q.length / p.n;
  let num = 0,
    den = 0;
  for (let j = 0; j < p.n; j++) {
    for (let c = 0; c < p.k; c++) {
      const x = p.w[j * p.k + c]!,
        d = q.q[j * dp + c]! * q.scale[j]! - x;
      num += d * d;
      den += x * x;
    }
  }
  return den > 0 ? Math.sqrt(num / den) : 0;
}

function errorsOf(p: Probe, rows: Float32Array[]): { int8: number; w8: number } {
  if (p.op === 'Gather') {
    const e = tableError(p);
    return { int8: e, w8: e };
  }
  if (p.op === 'planc.ProjectTopK') {
    const wt = p.transposed ? p.w : transposeMatrix(p.w, p.k, p.n);
    const q = quantizeRows(wt, p.n, p.k);
    const f = (input: 'int8' | 'float32') => (x: Float32Array, m: number) =>
      qlogitsRef({ x, rows: m, d: p.k, v: p.n, input, w: q.q as Int8Array, scale: q.scale });
    return { int8: relError(p, rows, f('int8')), w8: relError(p, rows, f('float32')) };
  }
  const q = quantizeChannels(p.w, p.k, p.n, 8);
  const f = (input: 'int8' | 'float32') => (x: Float32Array, m: number) =>
    qmatmulRef({ a: x, m, k: p.k, n: p.n, input, w: q.q, scale: q.scale, bias: p.bias });
  return { int8: relError(p, rows, f('int8')), w8: relError(p, rows, f('float32')) };
}

/**
 * Every product's int8 and w8 output error on the inputs it sees while the float32 model translates the first
 * SENTENCES calibration sentences (encoder products: the encoder run; decoder products: every greedy step).
 */
export function layerErrors(
  model: Model,
  pipe: PassContext,
  _fp32: Plan,
  tok: Tokenizer,
  rules: DecodingRules,
  sentences: string[],
  profile: ProfileOptions,
  progress?: ProgressReporter,
): LayerError[] {
  const optimized = runPipeline(model, { ...pipe, quantize: undefined, services: undefined });
  const probes = probesOf(optimized);
  const built = buildPlan(exposeInputs(optimized, probes), {
    ...profile,
    maxBatch: Math.max(profile.maxBatch, CALIBRATION_BATCH),
    target: 'cpu',
  });
  const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'probe.plan');
  const rows = new Map(probes.map((p) => [`${p.graph}\u0000${p.node}`, [] as Float32Array[]]));
  try {
    const sources = sentences
      .slice(0, SENTENCES)
      .map((s) => tok.encodeSource(s))
      .filter((s) => s.length <= profile.maxSrcLen);
    const encoder = probes.filter((p) => p.graph === 'encoder' && p.input);
    for (const src of sources) {
      const ids = BigInt64Array.from(src, (x) => BigInt(x));
      const out = plan.runSync('encoder', {
        input_ids: { dtype: 'int64', dims: [1, src.length], data: ids },
        attention_mask: { dtype: 'int64', dims: [1, src.length], data: ids.map(() => 1n) },
      });
      for (const p of encoder)
        sampleRows(
          out[p.input]!.data as Float32Array,
          p.k,
          Math.ceil(ROWS / sources.length),
          rows.get(`${p.graph}\u0000${p.node}`)!,
        );
    }
    const decoder = probes.filter((p) => p.graph !== 'encoder' && p.input);
    let calls = 0;
    greedyExposed(plan, sources, rules, profile.maxTgtLen, (out, r, _s, banned) => {
      if (calls++ % 3 !== 0) return rowBest(out, r, false, banned).tok; // every third step's rows: spread over the sentences
      for (const p of decoder) {
        const t = out[p.input];
        if (!t) continue; // this step ran the other decoder graph
        const k = p.k,
          per = t.data.length / k / (t.dims[0] ?? 1);
        const mine = (t.data as Float32Array).subarray(r * per * k, (r + 1) * per * k);
        const into = rows.get(`${p.graph}\u0000${p.node}`)!;
        const max = p.op === 'planc.ProjectTopK' ? PROJECTION_ROWS : ROWS;
        if (into.length < max) sampleRows(mine, k, into.length + 1, into);
      }
      return rowBest(out, r, false, banned).tok;
    });
  } finally {
    plan.close();
  }
  const bar = progress?.bar('layer errors', probes.length);
  const errors = probes.map((p) => {
    const e = errorsOf(p, rows.get(`${p.graph}\u0000${p.node}`)!);
    bar?.tick(1);
    return { graph: p.graph, node: p.node, op: p.op, ...e, bound: INT8_ERROR_BOUND };
  });
  bar?.done();
  return errors;
}
