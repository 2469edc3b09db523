// Rows that join a running decode batch (issue 27): from a decoder_with_past with in-place caches (after
// passes/kv-cache-in-place.ts), two more graphs, decoder_with_past left as it is.
// - decoder_with_past_rows: each batch row has its own cached length. An int64 [batch] input past_lengths goes to every
//   planc.CacheWrite (input 3) and every cached planc.Attention (input 5); past_sequence_length stays (the longest
//   row's, bounding kv_len). What decoder_with_past computed from the past length alone (the "position slice":
//   position embeddings) becomes graph inputs row_position.K, one row per batch row.
// - decoder_positions: the position slice alone, past_sequence_length (and inputs it reads through Shape) in,
//   row_position.K out, as decoder_with_past computes them at that past length.
// A slice value whose dims grow with the past length (a causal mask, T5's relative position bias) cannot be fed per
// row; it is kept reading the scalar only where it is an attention mask whose values at the first p + 1 keys are
// the same at every longer past length P, so that each row's keys see what they would at its own length (the
// exporters' causal masks of one-token steps: all zeros). That is checked by evaluating the slice (reference
// evaluator, p and P in 0..6, 13, 31): a check by samples, not a proof. A row_position value with a batch dim is
// checked to have equal rows. Anything else declines (--explain says why) and the model gets neither graph.
import {
  CACHE_INPUT_PREFIX,
  PAST_LENGTH_INPUT,
  POSITION_IDS_INPUT,
  POSITIONS_GRAPH,
  ROW_PAST_LENGTHS_INPUT,
  ROW_POSITION_PREFIX,
  ROWS_STEP_GRAPH,
  STEP_INPUT,
  STEP_TOKENS_SYMBOL,
} from '../compiler/plan/io-names.ts';
import { Diagnostics } from '../compiler/diagnostics.ts';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferGraph, type Facts } from '../model/infer/infer.ts';
import type { Graph, Model, Node, Value } from '../compiler/ir.ts';
import { dimBind, dimEq, dimEval, dimStr, dimSymbols, isSym, shapeStr, type Dim } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { copyGraph, copyModel, dropDeadNodes, pruneUnused, type Pass, type PassContext } from './pass.ts';
import { rebuildShape } from './shape-rebuild.ts';

const NAME = 'row-lengths';
/** The decoder step this pass reads. */
export const STEP_GRAPH = 'decoder_with_past';

/** Elementwise (broadcasting) ops: a per-row operand in place of a shared one computes each row as before. */
const ELEMENTWISE = new Set([
  'Add',
  'Sub',
  'Mul',
  'Div',
  'Pow',
  'Max',
  'Min',
  'Mod',
  'Where',
  'Equal',
  'Less',
  'Greater',
  'LessOrEqual',
  'GreaterOrEqual',
  'And',
  'Or',
  'Xor',
  'BitwiseAnd',
  'BitwiseOr',
  'BitwiseXor',
  'Sum',
  'Mean',
]);
/** Inputs of ops that are host-side shape math (the shape/index operands of Reshape, Expand, Slice, ...). */
const SHAPE_OPERANDS: Record<string, number[]> = {
  Reshape: [1],
  Expand: [1],
  Slice: [1, 2, 3, 4],
  ConstantOfShape: [0],
  Range: [0, 1, 2],
  Tile: [1],
  Unsqueeze: [1],
  Squeeze: [1],
  Pad: [1, 2, 3],
  Resize: [1, 2, 3],
  TopK: [1],
  Split: [1],
  ReduceSum: [1],
  ReduceMean: [1],
  ReduceMax: [1],
  ReduceMin: [1],
};

/** How a value depends on the graph inputs: constants only, shapes only, the past length's data, or other data. */
type Kind = 'const' | 'shape' | 'past' | 'data';

/** What the pass found in decoder_with_past, or why it declines. */
interface Analysis {
  kinds: Map<string, Kind>;
  /** Cut values that become row_position.K inputs: value → its input's dims in decoder_with_past_rows. */
  rows: Map<string, { name: string; dims: Dim[]; readers: { node: number; input: number }[] }>;
  /** Attention masks kept reading the scalar (checked prefix-consistent). */
  masks: { value: string; node: number }[];
}

class Decline extends Error {
  constructor(
    readonly node: string,
    why: string,
  ) {
    super(why);
  }
}

/** Per value, how it depends on the graph inputs (topological, nodes in order). */
function kindsOf(g: Graph): Map<string, Kind> {
  const kinds = new Map<string, Kind>();
  for (const x of g.inputs) kinds.set(x, x === PAST_LENGTH_INPUT ? 'past' : 'data');
  for (const x of g.initializers.keys()) kinds.set(x, 'const');
  for (const n of g.nodes) {
    let k: Kind;
    if (n.op === 'Shape' && n.domain === '') k = kinds.get(n.inputs[0]!) === 'past' ? 'past' : 'shape';
    else if (Object.values(n.attrs).some((a) => a.kind === 'graph' || a.kind === 'graphs')) k = 'data';
    else if (n.inputs.every((x) => !x)) k = n.op === 'Constant' && n.domain === '' ? 'const' : 'data';
    else {
      const ks = n.inputs.filter((x) => x).map((x) => kinds.get(x) ?? 'data');
      k = ks.includes('data') ? 'data' : ks.includes('past') ? 'past' : ks.includes('shape') ? 'shape' : 'const';
    }
    for (const o of n.outputs) if (o) kinds.set(o, k);
  }
  return kinds;
}

const dependsOn = (d: Dim, symbol: string) => isSym(d) && dimSymbols(d).includes(symbol);

function analyze(g: Graph, facts: Facts): Analysis {
  const kinds = kindsOf(g);
  const pastDim = g.values.get(PAST_LENGTH_INPUT)?.type?.sym?.[0];
  const pastSym =
    pastDim !== undefined && isSym(pastDim) && pastDim.terms.size === 1 ? [...pastDim.terms.keys()][0]! : undefined;
  if (pastSym === undefined) throw new Decline(g.name, `'${PAST_LENGTH_INPUT}' binds no single past-length symbol`);
  const batch = facts.get(STEP_INPUT)?.shape?.[0] ?? g.values.get(STEP_INPUT)?.type?.shape?.[0];
  if (batch === undefined) throw new Decline(g.name, `'${STEP_INPUT}' has no known batch dim`);
  for (const o of g.outputs)
    if (kinds.get(o) === 'past') throw new Decline(o, `graph output '${o}' is computed from the past length alone`);
  const rows: Analysis['rows'] = new Map();
  const masks: Analysis['masks'] = [];
  g.nodes.forEach((n, i) => {
    if (n.outputs.some((o) => o && kinds.get(o) === 'past')) return; // inside the slice
    n.inputs.forEach((v, k) => {
      if (!v || kinds.get(v) !== 'past') return;
      if (n.domain === 'planc' && ((n.op === 'Attention' && k === 4) || (n.op === 'CacheWrite' && k === 2))) return; // host scalars
      const vd = facts.get(v)?.shape;
      const dtype = facts.get(v)?.dtype;
      if (!vd) throw new Decline(n.name, `input ${k} '${v}' is computed from the past length and has no known shape`);
      if (vd.some((d) => dependsOn(d, pastSym))) {
        if (n.domain === 'planc' && n.op === 'Attention' && k === 3) {
          masks.push({ value: v, node: i });
          return;
        }
        throw new Decline(
          n.name,
          `input ${k} '${v}' ${shapeStr(vd)} is computed from the past length and its dims depend on it, so it cannot be fed one row per batch row`,
        );
      }
      if (n.domain !== '' || !ELEMENTWISE.has(n.op)) {
        if (dtype === 'int64' && SHAPE_OPERANDS[n.op]?.includes(k))
          throw new Decline(n.name, `input ${k} '${v}' of ${n.op} is host shape math computed from the past length`);
        throw new Decline(
          n.name,
          `input ${k} '${v}' is computed from the past length and read by ${n.domain ? `${n.domain}.` : ''}${n.op}, which is not elementwise`,
        );
      }
      const out = facts.get(n.outputs[0]!)?.shape;
      if (!out || out.length === 0 || !dimEq(out[0]!, batch))
        throw new Decline(
          n.name,
          `its output ${shapeStr(out)} is not [${dimStr(batch)}, ...], so a per-row '${v}' would change it`,
        );
      const r = out.length;
      let dims: Dim[];
      if (vd.length === r && (vd[0] === 1 || dimEq(vd[0]!, batch))) dims = [batch, ...vd.slice(1)];
      else if (vd.length === r - 1) dims = [batch, ...vd];
      else
        throw new Decline(
          n.name,
          `input ${k} '${v}' ${shapeStr(vd)} is computed from the past length, neither of rank ${r} with dim 0 1 or ${dimStr(batch)} nor of rank ${r - 1}`,
        );
      if (dims.some((d, a) => !(d === 1 || dimEq(d, out[a]!))))
        throw new Decline(n.name, `a per-row '${v}' ${shapeStr(dims)} would change its output ${shapeStr(out)}`);
      const had = rows.get(v);
      if (had && had.dims.map(dimStr).join() !== dims.map(dimStr).join())
        throw new Decline(n.name, `'${v}' is read per row as both ${shapeStr(had.dims)} and ${shapeStr(dims)}`);
      const entry = had ?? { name: `${ROW_POSITION_PREFIX}${rows.size}`, dims, readers: [] };
      entry.readers.push({ node: i, input: k });
      rows.set(v, entry);
    });
  });
  return { kinds, rows, masks };
}

/**
 * A graph computing `outputs` (value in g → output name) from the slice alone: the nodes they need, a Shape of a
 * computed value rebuilt from the graph inputs' dims (so the graph reads inputs through Shape only).
 */
function sliceGraph(
  g: Graph,
  facts: Facts,
  kinds: Map<string, Kind>,
  name: string,
  outputs: Map<string, string>,
): Graph {
  const producer = new Map<string, number>();
  g.nodes.forEach((n, i) => n.outputs.forEach((o) => o && producer.set(o, i)));
  const pastDim = g.values.get(PAST_LENGTH_INPUT)!.type!.sym![0]!;
  const isCache = (x: string) => x.startsWith(CACHE_INPUT_PREFIX) || x.startsWith('past_key_values.');
  const sources = [
    ...g.inputs.filter((x) => x === STEP_INPUT),
    ...g.inputs.filter((x) => x !== STEP_INPUT && x !== PAST_LENGTH_INPUT && !isCache(x)),
    ...g.inputs.filter(isCache),
  ];
  const taken = new Map<number, Node[]>();
  const inputs = new Set<string>();
  const inits = new Set<string>();
  const work = [...outputs.keys()];
  const seen = new Set<string>();
  while (work.length > 0) {
    const x = work.pop()!;
    if (!x || seen.has(x)) continue;
    seen.add(x);
    if (g.inputs.includes(x)) {
      inputs.add(x);
      continue;
    }
    if (g.initializers.has(x)) {
      inits.add(x);
      continue;
    }
    const i = producer.get(x);
    if (i === undefined) throw new Decline(x, `'${x}' has no producer`);
    if (taken.has(i)) continue;
    const n = g.nodes[i]!;
    let nodes: Node[] = [{ ...n, inputs: [...n.inputs], outputs: [...n.outputs] }];
    const src = n.inputs[0]!;
    if (n.op === 'Shape' && n.domain === '' && kinds.get(src) !== 'past' && !g.inputs.includes(src)) {
      const dims = facts.get(src)?.shape;
      const rebuilt = dims && rebuildShape(g, n, dims, sources, [{ value: PAST_LENGTH_INPUT, dim: pastDim }]);
      if (!rebuilt)
        throw new Decline(n.name, `the shape of '${src}' ${shapeStr(dims)} cannot be rebuilt from the graph inputs`);
      nodes = rebuilt;
    } else if (kinds.get(x) === 'data') {
      throw new Decline(n.name, `'${x}' depends on graph inputs other than through Shape`);
    }
    taken.set(i, nodes);
    for (const m of nodes) for (const o of m.outputs) seen.add(o);
    for (const m of nodes) for (const y of m.inputs) work.push(y);
  }
  const rename = (x: string) => outputs.get(x) ?? x;
  const nodes: Node[] = [];
  g.nodes.forEach((_, i) => {
    for (const n of taken.get(i) ?? [])
      nodes.push({ ...n, inputs: n.inputs.map(rename), outputs: n.outputs.map(rename) });
  });
  // an output that is a graph input (the past length itself) is copied
  for (const [v, o] of outputs) {
    if (!inputs.has(v)) continue;
    nodes.push({ name: `${o}/identity`, op: 'Identity', domain: '', inputs: [v], outputs: [o], attrs: {}, origin: [] });
  }
  const values = new Map<string, Value>();
  const declare = (x: string, from = x) => {
    if (!x || values.has(x)) return;
    const t =
      g.values.get(from)?.type ?? (facts.get(from) && { dtype: facts.get(from)!.dtype, shape: facts.get(from)!.shape });
    values.set(x, t ? { name: x, type: { ...t } } : { name: x });
  };
  const orderedInputs = g.inputs.filter((x) => inputs.has(x));
  for (const x of orderedInputs) declare(x);
  for (const x of inits) declare(x);
  for (const [v, o] of outputs) declare(o, v);
  for (const n of nodes) for (const x of [...n.inputs, ...n.outputs]) declare(x);
  return {
    name,
    inputs: orderedInputs,
    outputs: [...outputs.values()],
    nodes,
    values,
    initializers: new Map([...inits].map((x) => [x, g.initializers.get(x)!])),
  };
}

/** Zero feeds for a slice graph at past length p: symbolic dims 1 (the batch symbol `batch`), one step token. */
function feedsAt(g: Graph, p: number, batchSym: string | undefined, batch: number): Record<string, Tensor> {
  const bind = new Map<string, number>();
  const feeds: Record<string, Tensor> = {};
  for (const x of g.inputs) {
    const t = g.values.get(x)!.type!;
    if (x === PAST_LENGTH_INPUT) {
      feeds[x] = Tensor.fromNumbers('int64', [], [p]);
      continue;
    }
    const dims = (t.shape ?? []).map((d, a) => {
      if (typeof d === 'number') return d;
      if (x === STEP_INPUT && a === 1) return 1;
      for (const s of dimSymbols(d)) if (!bind.has(s)) bind.set(s, s === batchSym ? batch : 1);
      return dimEval(d, bind) ?? 1;
    });
    feeds[x] = Tensor.zeros(t.dtype, dims);
  }
  return feeds;
}

/**
 * Checks by evaluation what the rewrite assumes of the slice: a kept mask's values at the first p + 1 keys are the
 * same at every longer past length; a row_position value with a batch dim has the same rows at batch 2 as at batch 1.
 */
function checkSlice(model: Model, g: Graph, facts: Facts, a: Analysis): void {
  const batchDim = g.values.get(STEP_INPUT)?.type?.shape?.[0];
  const batchSym =
    batchDim !== undefined && isSym(batchDim) && batchDim.terms.size === 1 ? [...batchDim.terms.keys()][0] : undefined;
  const probe = new Map<string, string>();
  for (const m of a.masks) probe.set(m.value, `mask.${probe.size}`);
  const batched = [...a.rows].filter(([v, e]) => {
    const vd = facts.get(v)!.shape!;
    return vd.length === e.dims.length && vd[0] !== 1;
  });
  for (const [v] of batched) if (!probe.has(v)) probe.set(v, `rows.${probe.size}`);
  if (probe.size === 0) return;
  const name = `${NAME}:probe`;
  const pg = sliceGraph(g, facts, a.kinds, name, probe);
  const m: Model = { ...model, graphs: new Map([[name, pg]]) };
  const run = (p: number, b: number) => {
    try {
      return evaluate(m, name, feedsAt(pg, p, batchSym, b));
    } catch (e) {
      throw new Decline(
        g.name,
        `the values computed from the past length could not be evaluated at past length ${p}, batch ${b} (${(e as Error).message})`,
      );
    }
  };
  const pasts = [0, 1, 2, 3, 4, 5, 6, 13, 31];
  const at = new Map(pasts.map((p) => [p, run(p, 1)]));
  for (const mk of a.masks) {
    const o = probe.get(mk.value)!;
    const node = g.nodes[mk.node]!.name;
    for (const p of pasts) {
      const small = at.get(p)![o]!;
      for (const P of pasts.filter((x) => x > p)) {
        const big = at.get(P)![o]!;
        if (!prefixEqual(small, big)) {
          throw new Decline(
            node,
            `its mask '${mk.value}' is computed from the past length with dims that depend on it, and its values at the first ${p + 1} keys differ between past lengths ${p} and ${P} (a relative position bias?), so rows of different lengths cannot share it`,
          );
        }
      }
    }
  }
  for (const [v] of batched) {
    const o = probe.get(v)!;
    for (const p of [0, 3]) {
      const one = at.get(p)![o]!,
        two = run(p, 2)[o]!;
      const n = one.size;
      if (two.size !== 2 * n || [0, 1].some((r) => one.nums.some((x, e) => two.nums[r * n + e] !== x))) {
        throw new Decline(
          v,
          `'${v}' has a batch dim and its rows are not all the same, so one row per past length cannot stand for it`,
        );
      }
    }
  }
}

/** Whether `small` equals `big` cut to small's dims (the key axis, last, is longer in big; other dims equal). */
function prefixEqual(small: Tensor, big: Tensor): boolean {
  if (small.rank !== big.rank || small.rank === 0) return false;
  const r = small.rank;
  if (small.dims.slice(0, r - 1).join() !== big.dims.slice(0, r - 1).join()) return false;
  const ks = small.dims[r - 1]!,
    kb = big.dims[r - 1]!;
  if (ks > kb) return false;
  const rowsN = small.size / Math.max(1, ks);
  const a = small.nums,
    b = big.nums;
  for (let i = 0; i < rowsN; i++)
    for (let j = 0; j < ks; j++) {
      const x = Number(a[i * ks + j]),
        y = Number(b[i * kb + j]);
      if (x !== y && !(Number.isNaN(x) && Number.isNaN(y))) return false;
    }
  return true;
}

/** decoder_with_past_rows: the step with past_lengths and the row_position.K inputs. */
function rowsGraph(g: Graph, facts: Facts, a: Analysis): Graph {
  const batch = (facts.get(STEP_INPUT)?.shape ?? g.values.get(STEP_INPUT)!.type!.shape!)[0]!;
  const r: Graph = { ...copyGraph(g), name: ROWS_STEP_GRAPH };
  r.inputs.push(ROW_PAST_LENGTHS_INPUT);
  r.values.set(ROW_PAST_LENGTHS_INPUT, { name: ROW_PAST_LENGTHS_INPUT, type: { dtype: 'int64', shape: [batch] } });
  for (const [v, e] of a.rows) {
    r.inputs.push(e.name);
    r.values.set(e.name, { name: e.name, type: { dtype: facts.get(v)!.dtype, shape: e.dims } });
    for (const { node, input } of e.readers) r.nodes[node]!.inputs[input] = e.name;
  }
  for (const n of r.nodes) {
    if (n.domain !== 'planc') continue;
    if (n.op === 'CacheWrite') {
      n.inputs = [...n.inputs.slice(0, 3), ROW_PAST_LENGTHS_INPUT];
    } else if (n.op === 'Attention' && n.inputs[4]) {
      n.inputs = [...n.inputs.slice(0, 5), ROW_PAST_LENGTHS_INPUT];
    }
  }
  dropDeadNodes(r); // what only the replaced slice values needed goes
  const declared = new Set(r.inputs);
  pruneUnused(r);
  for (const x of declared) if (!r.values.has(x)) r.values.set(x, g.values.get(x) ?? { name: x });
  return r;
}

/** A copy of a decoder step of up to N new tokens with its token axis (the step_tokens symbol) bound to 1. */
function oneTokenStep(g: Graph): Graph {
  const bind = (d: Dim) => dimBind(d, STEP_TOKENS_SYMBOL, 1);
  const one = copyGraph(g);
  for (const v of one.values.values())
    if (v.type)
      v.type = { ...v.type, shape: v.type.shape?.map(bind), ...(v.type.sym ? { sym: v.type.sym.map(bind) } : {}) };
  return one;
}

/** Adds decoder_with_past_rows and decoder_positions to a model whose decoder_with_past has in-place caches. */
export function addRowGraphs(model: Model, ctx: PassContext): Model {
  const step = model.graphs.get(STEP_GRAPH);
  if (!step || model.graphs.has(ROWS_STEP_GRAPH)) return model;
  // a step of up to N tokens (passes/step-tokens.ts): the rows graphs are made from it at one token
  const g = (model.decoding.stepTokens ?? 1) > 1 ? oneTokenStep(step) : step;
  const explain = (node: string, why: string) => ctx.explain?.(NAME, node, why);
  /** Leaves the model as it is, saying why. */
  const decline = (why: string): Model => {
    explain(g.name, why);
    return model;
  };
  if (g.inputs.includes(POSITION_IDS_INPUT))
    return decline(
      `the step takes '${POSITION_IDS_INPUT}' (an HRT model): each row's position is fed, not computed from the past length`,
    );
  if (!g.inputs.includes(PAST_LENGTH_INPUT))
    return decline(`no in-place caches ('${PAST_LENGTH_INPUT}' input), so rows cannot have their own cached length`);
  if (!g.nodes.some((x) => x.domain === 'planc' && x.op === 'CacheWrite'))
    return decline('no planc.CacheWrite: no in-place caches');
  const facts = inferGraph(model, g, { annotate: false }, new Diagnostics());
  try {
    const a = analyze(g, facts);
    checkSlice(model, g, facts, a);
    const positions =
      a.rows.size > 0
        ? sliceGraph(g, facts, a.kinds, POSITIONS_GRAPH, new Map([...a.rows].map(([v, e]) => [v, e.name])))
        : undefined;
    const out = copyModel(model);
    out.graphs.set(ROWS_STEP_GRAPH, rowsGraph(g, facts, a));
    if (positions) out.graphs.set(POSITIONS_GRAPH, positions);
    else
      explain(
        g.name,
        `nothing is computed from the past length alone: ${ROWS_STEP_GRAPH} has no row_position inputs and there is no ${POSITIONS_GRAPH}`,
      );
    return out;
  } catch (e) {
    if (!(e instanceof Decline)) throw e;
    explain(e.node, `${e.message}; no ${ROWS_STEP_GRAPH} or ${POSITIONS_GRAPH}`);
    return model;
  }
}

export const ROW_LENGTHS: Pass = {
  name: NAME,
  summary: `decoder_with_past with in-place caches  ⇒  + ${ROWS_STEP_GRAPH} (rows with their own past length) and ${POSITIONS_GRAPH} (what it computed from the past length alone)`,
  run: addRowGraphs,
};
