// Opt-in (PassContext.quantize): products over constant float32 weights become quantized ones (seed 002 §4.2-4.5):
// MatMul / planc.FusedMatMul → planc.QMatMul, planc.ProjectTopK → planc.QProjectTopK, embedding Gather → planc.QGather
// (vocabulary tables int8 per row with a 4-bit residual plane: rescored candidates and 12-bit embedding rows); fp16 /
// bf16 keep the ops and give them the weight in float16 / bfloat16 (an embedding Gather widened by a Cast after it);
// each weight quantized once (memoized by weight id across graphs) and stored once (by content).
import { fail } from '../compiler/diagnostics-catalog.ts';
import { ONNX_CODE } from '../compiler/dtype.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import {
  HALF_DTYPE,
  type HalfPrecision,
  isHalf,
  LAYER_PRECISIONS,
  type LayerPrecision,
  type QuantizedLayer,
} from '../compiler/quant/layers.ts';
import { quantizeChannels, quantizeRows, type QuantizedWeight } from '../compiler/quant/pack.ts';
import { Tensor, transposeMatrix } from '../compiler/tensor.ts';
import {
  addInitializer,
  copyModel,
  freshName,
  pruneUnused,
  type Pass,
  type PassContext,
  type QuantizeOptions,
} from './pass.ts';

const NAME = 'quantize';

/** The precision of the int inputs of QMatMul (compiler/kernel-enums.ts QUANT_INPUTS) for a layer precision. */
const INPUT_OF = { int8: 'int8', w8: 'float32', int16: 'int16' } as const;
/**
 * The input of QProjectTopK's first pass: the vocabulary table is int8 rows with a residual plane in every precision,
 * so int16 asks for what int8 gives (its best ids are rescored at 12 bits from float32 inputs either way).
 */
const PROJECTION_INPUT_OF = { int8: 'int8', w8: 'float32', int16: 'int8' } as const;

const opKey = (n: Node) => (n.domain ? `${n.domain}.${n.op}` : n.op);

/** Quantized weights (or half tensors) by source weight id and form: each weight is converted once however many graphs read it. */
type Memo = Map<string, QuantizedWeight | Tensor>;

/** A constant float32 matrix read by `name` in g: its weight id and tensor. */
export function constWeight(model: Model, g: Graph, name: string): { id: string; t: Tensor } | undefined {
  const id = g.initializers.get(name);
  const t = id === undefined ? undefined : model.weights.get(id)?.tensor;
  return t && t.dtype === 'float32' && t.rank === 2 ? { id: id!, t } : undefined;
}

function memoized<T extends QuantizedWeight | Tensor>(memo: Memo, key: string, make: () => T): T {
  const known = memo.get(key);
  if (known) return known as T;
  const q = make();
  memo.set(key, q);
  return q;
}

/**
 * The weight `name` reads (id `id`, float32 t) in p's half dtype as a new initializer of g (one tensor per weight
 * and dtype: an embedding and the output layer tied to it share it); returns its name and tensor.
 */
function addHalf(
  model: Model,
  g: Graph,
  name: string,
  w: { id: string; t: Tensor },
  p: HalfPrecision,
  memo: Memo,
): { name: string; t: Tensor } {
  const t = memoized(memo, `${p}:${w.id}`, () => Tensor.fromNumbers(HALF_DTYPE[p], w.t.dims, w.t.nums));
  const half = freshName(g, `${name}_${p}`);
  addInitializer(model, g, half, t);
  return { name: half, t };
}

/** Where a rewrite adds a node after the one it rewrote (applied when the graph's walk ends). */
type InsertAfter = (n: Node, next: Node) => void;

/** Adds the quantized weight's tensors as initializers named after the source weight; returns their names (q, scale, sum, residual plane or ''). */
function addQuantized(model: Model, g: Graph, base: string, q: QuantizedWeight): [string, string, string, string] {
  const names = [
    freshName(g, `${base}_q`),
    freshName(g, `${base}_qscale`),
    freshName(g, `${base}_qsum`),
    q.res ? freshName(g, `${base}_qres`) : '',
  ] as const;
  addInitializer(model, g, names[0], new Tensor(q.q instanceof Int8Array ? 'int8' : 'int16', q.dims, q.q));
  addInitializer(model, g, names[1], new Tensor('float32', [q.scale.length], q.scale));
  addInitializer(model, g, names[2], new Tensor('int32', [q.sum.length], q.sum));
  if (q.res) addInitializer(model, g, names[3], new Tensor('uint8', [q.dims[0]!, q.dims[1]! / 2], q.res));
  return [...names];
}

/** The weight ids of initializers (the quantized forms a layer reads). */
const idsOf = (g: Graph, names: string[]) => names.map((x) => g.initializers.get(x)!);

const bytesOf = (q: QuantizedWeight) =>
  q.q.byteLength + q.scale.byteLength + q.sum.byteLength + (q.res?.byteLength ?? 0);

function quantizeMatMul(
  model: Model,
  g: Graph,
  n: Node,
  p: Exclude<LayerPrecision, 'float32'>,
  memo: Memo,
): QuantizedLayer | string {
  const w = constWeight(model, g, n.inputs[1]!);
  if (!w) return 'its weight is not a constant float32 matrix';
  if (isHalf(p)) {
    // a plain MatMul becomes planc.FusedMatMul without epilogue (ONNX MatMul has one dtype for both operands)
    const op = opKey(n);
    if (op === 'MatMul') {
      const rank = g.values.get(n.inputs[0]!)?.type?.shape?.length;
      if (rank === undefined || rank < 2)
        return "its input is not known to have rank ≥ 2 (planc.FusedMatMul's operand)";
      Object.assign(n, {
        op: 'FusedMatMul',
        domain: 'planc',
        attrs: { activation: { kind: 'string', value: 'none' } },
      });
    }
    return halfOperand(model, g, n, 1, w, p, memo, op);
  }
  const [k, nOut] = w.t.dims as [number, number];
  const bits = p === 'int16' ? 16 : 8;
  const q = memoized(memo, `channels:${bits}:${w.id}`, () => quantizeChannels(w.t.nums as Float32Array, k, nOut, bits));
  const [wq, scale, sum] = addQuantized(model, g, n.inputs[1]!, q);
  const derived = idsOf(g, p === 'int8' ? [wq, scale, sum] : [wq, scale]);
  const act = n.attrs.activation ?? { kind: 'string', value: 'none' };
  const op = opKey(n);
  n.op = 'QMatMul';
  n.domain = 'planc';
  n.inputs = [n.inputs[0]!, wq, scale, p === 'int8' ? sum : '', n.inputs[2] ?? '', n.inputs[3] ?? ''];
  while (n.inputs.length > 4 && n.inputs[n.inputs.length - 1] === '') n.inputs.pop();
  n.attrs = {
    activation: act,
    input: { kind: 'string', value: INPUT_OF[p] },
    n: { kind: 'int', value: nOut },
    k: { kind: 'int', value: k },
  };
  return {
    graph: g.name,
    node: n.name,
    op,
    precision: p,
    weight: w.id,
    derived,
    bytesBefore: w.t.size * 4,
    bytesAfter: bytesOf(q),
  };
}

/** fp16 / bf16: the op kept, its weight operand (input i) replaced by the weight in the half dtype. */
function halfOperand(
  model: Model,
  g: Graph,
  n: Node,
  i: number,
  w: { id: string; t: Tensor },
  p: HalfPrecision,
  memo: Memo,
  op: string,
): QuantizedLayer {
  const half = addHalf(model, g, n.inputs[i]!, w, p, memo);
  n.inputs[i] = half.name;
  return {
    graph: g.name,
    node: n.name,
    op,
    precision: p,
    weight: w.id,
    derived: idsOf(g, [half.name]),
    bytesBefore: w.t.size * 4,
    bytesAfter: half.t.size * 2,
  };
}

function quantizeProjection(
  model: Model,
  g: Graph,
  n: Node,
  p: Exclude<LayerPrecision, 'float32'>,
  memo: Memo,
): QuantizedLayer | string {
  const w = constWeight(model, g, n.inputs[1]!);
  if (!w) return 'its weight is not a constant float32 matrix';
  if (isHalf(p)) return halfOperand(model, g, n, 1, w, p, memo, 'planc.ProjectTopK');
  const transposed = n.attrs.transposed?.kind === 'int' && n.attrs.transposed.value === 1;
  const [d, v] = (transposed ? [w.t.dims[1], w.t.dims[0]] : w.t.dims) as [number, number];
  const q = memoized(memo, `rows:${transposed}:${w.id}`, () => {
    const src = w.t.nums as Float32Array;
    return quantizeRows(transposed ? src : transposeMatrix(src, d, v), v, d);
  });
  const [wq, scale, sum, res] = addQuantized(model, g, n.inputs[1]!, q);
  const derived = idsOf(g, [wq, scale, sum, res]);
  n.op = 'QProjectTopK';
  n.inputs = [n.inputs[0]!, wq, scale, sum, n.inputs[2] ?? '', n.inputs[3] ?? '', res];
  n.attrs = { k: n.attrs.k!, input: { kind: 'string', value: PROJECTION_INPUT_OF[p] }, d: { kind: 'int', value: d } };
  return {
    graph: g.name,
    node: n.name,
    op: 'planc.ProjectTopK',
    precision: p,
    weight: w.id,
    derived,
    bytesBefore: w.t.size * 4,
    bytesAfter: bytesOf(q),
  };
}

/** Tables of at least this many bytes read by Gather along axis 0 are embeddings: quantized per row. */
const EMBEDDING_MIN_BYTES = 1 << 20;

/**
 * An embedding Gather(E, ids) → planc.QGather(Eq, scale, ids), Eq in qproject_topk's layout (a tied output layer shares
 * it); fp16 / bf16: Cast(Gather(E in the half dtype, ids), float32).
 */
function quantizeEmbedding(
  model: Model,
  g: Graph,
  n: Node,
  p: Exclude<LayerPrecision, 'float32'>,
  memo: Memo,
  insertAfter: InsertAfter,
): QuantizedLayer | string {
  const w = constWeight(model, g, n.inputs[0]!);
  const axis = n.attrs.axis?.kind === 'int' ? n.attrs.axis.value : 0;
  if (!w || axis !== 0 || w.t.size * 4 < EMBEDDING_MIN_BYTES)
    return 'not an embedding table (a constant float32 matrix of ≥ 1 MiB gathered along axis 0)';
  if (isHalf(p)) {
    const layer = halfOperand(model, g, n, 0, w, p, memo, 'Gather');
    const out = n.outputs[0]!;
    const rows = freshName(g, `${out}_${p}`);
    const type = g.values.get(out)?.type;
    g.values.set(rows, { name: rows, ...(type ? { type: { ...type, dtype: HALF_DTYPE[p] } } : {}) });
    n.outputs[0] = rows;
    insertAfter(n, {
      name: `${n.name}:widen`,
      op: 'Cast',
      domain: '',
      inputs: [rows],
      outputs: [out],
      attrs: { to: { kind: 'int', value: ONNX_CODE.float32 } },
      origin: n.origin,
    });
    return layer;
  }
  const [v, d] = w.t.dims as [number, number];
  const q = memoized(memo, `rows:true:${w.id}`, () => quantizeRows(w.t.nums as Float32Array, v, d));
  const [wq, scale, , res] = addQuantized(model, g, n.inputs[0]!, q);
  n.op = 'QGather';
  n.domain = 'planc';
  n.inputs = [wq, scale, n.inputs[1]!, res];
  n.attrs = { d: { kind: 'int', value: d } };
  return {
    graph: g.name,
    node: n.name,
    op: 'Gather',
    precision: p,
    weight: w.id,
    derived: idsOf(g, [wq, scale, res]),
    bytesBefore: w.t.size * 4,
    bytesAfter: q.q.byteLength + q.scale.byteLength + q.res!.byteLength,
  };
}

const QUANTIZERS: Record<string, typeof quantizeEmbedding> = {
  'planc.FusedMatMul': quantizeMatMul,
  MatMul: quantizeMatMul,
  'planc.ProjectTopK': quantizeProjection,
  Gather: quantizeEmbedding,
};

/** Checks that every per-layer choice names a product of the model and a known precision. */
function checkLayers(model: Model, o: QuantizeOptions): void {
  const products = new Set(
    [...model.graphs.values()].flatMap((g) => g.nodes.filter((n) => QUANTIZERS[opKey(n)]).map((n) => n.name)),
  );
  for (const [node, p] of Object.entries(o.layers ?? {})) {
    if (!(LAYER_PRECISIONS as readonly string[]).includes(p))
      fail(
        'optionProblem',
        { option: 'quantize', why: `layer '${node}' has unknown precision '${p}' (${LAYER_PRECISIONS.join(', ')})` },
        { node },
      );
    if (!products.has(node))
      fail(
        'optionProblem',
        {
          option: 'quantize',
          why: `no product named '${node}' (a MatMul, planc.FusedMatMul, planc.ProjectTopK or embedding Gather after fusion)`,
        },
        { node },
      );
  }
}

export const QUANTIZE: Pass = {
  name: NAME,
  summary:
    'planc.FusedMatMul / planc.ProjectTopK / embedding Gather over a constant float32 W  ⇒  planc.QMatMul / planc.QProjectTopK / planc.QGather over int8 or int16 W (only with quantize set)',
  run(model: Model, ctx: PassContext): Model {
    const o = ctx.quantize;
    if (!o) return model;
    checkLayers(model, o);
    const m = copyModel(model);
    const memo: Memo = new Map();
    const layers: QuantizedLayer[] = [];
    for (const g of m.graphs.values()) {
      const inserts: [Node, Node][] = [];
      for (const n of g.nodes) {
        const quantizer = QUANTIZERS[opKey(n)];
        if (!quantizer) continue;
        const p = o.layers?.[n.name] ?? o.precision;
        if (p === 'float32') {
          ctx.explain?.(NAME, n.name, 'kept in float32 (asked)');
          continue;
        }
        const done = quantizer(m, g, n, p, memo, (after, next) => inserts.push([after, next]));
        if (typeof done === 'string') ctx.explain?.(NAME, n.name, done);
        else layers.push(done);
      }
      for (const [after, next] of inserts) g.nodes.splice(g.nodes.indexOf(after) + 1, 0, next);
      pruneUnused(g);
    }
    m.quantized = layers;
    return m;
  },
};
