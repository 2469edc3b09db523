// Opt-in (PassContext.topk): a logits graph output X·W (+ bias [V] or [1, V]) becomes planc.ProjectTopK's k best log-probs and ids.
import { TOPK_IDS_OUTPUT, TOPK_LOGPROBS_OUTPUT } from '../compiler/plan/io-names.ts';
import { PlancError } from '../compiler/diagnostics.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { dimEq } from '../compiler/symbolic.ts';
import { copyModel, GraphView, Rewrites, type Pass, type PassContext } from './pass.ts';

const NAME = 'fuse-project-topk';
/** The graph outputs that replace the logits output, in this order. */
const TOPK_OUTPUTS = [TOPK_LOGPROBS_OUTPUT, TOPK_IDS_OUTPUT] as const;

interface Match { nodes: number[]; x: string; w: string; bias: string; transposed: number }

/** A constant 2-D float32 initializer? */
function weight2d(v: GraphView, value: string): boolean {
  return v.g.initializers.has(value) && v.dtype(value) === 'float32' && v.rank(value) === 2;
}

const isOnnx = (n: Node, op: string) => n.op === op && n.domain === '';

/** The weight behind MatMul's B: an initializer [D, V], or Transpose of an initializer [V, D] (transposed = 1). */
function weightOf(v: GraphView, b: string): { w: string; transposed: number; nodes: number[] } | string {
  if (weight2d(v, b)) return { w: b, transposed: 0, nodes: [] };
  const t = v.node(b);
  if (!t || !isOnnx(t[1], 'Transpose') || !weight2d(v, t[1].inputs[0]!)) return 'the weight is not a constant 2-D tensor (nor the Transpose of one)';
  const perm = t[1].attrs.perm;
  if (perm && !(perm.kind === 'ints' && perm.value.join() === '1,0')) return 'the weight is a Transpose with a perm other than [1, 0]';
  const e = t[1].inputs[0]!;
  // The Transpose goes with the fusion only when the MatMul is its only reader.
  return { w: e, transposed: 1, nodes: (v.uses.get(b) ?? []).length === 1 ? [t[0]] : [] };
}

/** What produces a graph output: MatMul (+ bias Add) or planc.FusedMatMul; undefined = not a candidate at all. */
function matchOutput(v: GraphView, out: string, explain: (node: string, why: string) => void): Match | undefined {
  const p = v.node(out);
  if (!p) return undefined;
  const [i, n] = p;
  let mm: [number, Node];
  let bias = '';
  const nodes: number[] = [];
  if (n.domain === 'planc' && n.op === 'FusedMatMul') {
    const act = n.attrs.activation;
    if (act && !(act.kind === 'string' && act.value === 'none')) return explain(n.name, 'the FusedMatMul has an activation'), undefined;
    if (n.inputs[3]) return explain(n.name, 'the FusedMatMul adds a residual'), undefined;
    mm = p;
    bias = n.inputs[2] ?? '';
  } else if (isOnnx(n, 'Add')) {
    const k = n.inputs.findIndex((x) => { const q = v.node(x); return !!q && isOnnx(q[1], 'MatMul'); });
    if (k < 0) return undefined;
    mm = v.node(n.inputs[k]!)!;
    bias = n.inputs[1 - k] ?? '';
    if (!v.isConst(bias)) return explain(n.name, 'the Add after the MatMul is not a constant bias'), undefined;
    if ((v.uses.get(n.inputs[k]!) ?? []).length !== 1) return explain(mm[1].name, 'the MatMul result has other consumers than the bias Add'), undefined;
    nodes.push(i);
  } else if (isOnnx(n, 'MatMul')) {
    mm = p;
  } else {
    return undefined;
  }
  const uses = v.uses.get(out) ?? [];
  if (uses.length !== 1) return explain(n.name, `the logits '${out}' have other consumers`), undefined;
  const w = weightOf(v, mm[1].inputs[1]!);
  if (typeof w === 'string') return explain(mm[1].name, w), undefined;
  const x = mm[1].inputs[0]!;
  if (v.dtype(x) !== 'float32' || (v.rank(x) ?? 0) < 2) return explain(mm[1].name, 'X is not a float32 tensor of rank ≥ 2'), undefined;
  const ws = v.shape(w.w)!;
  const vocab = ws[w.transposed ? 0 : 1]!;
  if (bias) {
    const bs = v.shape(bias);
    const flat = bs && bs.length >= 1 && bs.slice(0, -1).every((d) => d === 1) && dimEq(bs[bs.length - 1]!, vocab);
    if (v.dtype(bias) !== 'float32' || !flat) return explain(n.name, `the bias is not float32 [${vocab}] (or [1, ..., ${vocab}])`), undefined;
  }
  return { nodes: [...w.nodes, mm[0], ...nodes], x, w: w.w, bias, transposed: w.transposed };
}

function freshName(g: Graph, base: string): string {
  let name = base;
  for (let i = 1; g.values.has(name); i++) name = `${base}_${i}`;
  return name;
}

function fuseGraph(g: Graph, model: Model, k: number, ctx: PassContext): number {
  const v = new GraphView(g, model);
  const explain = (node: string, why: string) => ctx.explain?.(NAME, node, why);
  const rewrites = new Rewrites();
  let fused: { out: string; node: Node } | undefined;
  for (const out of g.outputs) {
    const m = matchOutput(v, out, explain);
    if (!m) continue;
    const producer = v.node(out)![1];
    const shape = g.values.get(out)?.type?.shape;
    const vocab = v.shape(m.w)![m.transposed ? 0 : 1]!;
    if (fused) { explain(producer.name, `only one output per graph becomes planc.ProjectTopK ('${fused.out}' already did)`); continue; }
    if (typeof vocab === 'number' && k > vocab) { explain(producer.name, `k = ${k} exceeds the vocabulary size ${vocab}`); continue; }
    if (!shape) { explain(producer.name, `the logits '${out}' have an unknown shape`); continue; }
    if (TOPK_OUTPUTS.some((name) => g.values.has(name))) { explain(producer.name, `the graph already has a value named ${TOPK_OUTPUTS.join(' or ')}`); continue; }
    const origin = m.nodes.flatMap((i) => g.nodes[i]!.origin);
    // A [1, ..., V] bias (final_logits_bias) is read as [V] through a Squeeze (a view).
    const squeeze: Node[] = (v.rank(m.bias) ?? 1) > 1 ? [{
      name: `${producer.name}:bias`, op: 'Squeeze', domain: '', inputs: [m.bias], outputs: [freshName(g, `${m.bias}_squeezed`)], attrs: {}, origin,
    }] : [];
    const bias = squeeze[0]?.outputs[0] ?? m.bias;
    const node: Node = {
      name: `${producer.name}:topk`, op: 'ProjectTopK', domain: 'planc', inputs: bias ? [m.x, m.w, bias] : [m.x, m.w], outputs: [...TOPK_OUTPUTS],
      attrs: { k: { kind: 'int', value: k }, transposed: { kind: 'int', value: m.transposed } }, origin,
    };
    if (!rewrites.replace(m.nodes, [...squeeze, node])) { explain(producer.name, 'its nodes are part of another rewrite'); continue; }
    fused = { out, node };
    const outShape = [...shape.slice(0, -1), k];
    g.values.set(TOPK_OUTPUTS[0], { name: TOPK_OUTPUTS[0], type: { dtype: 'float32', shape: outShape } });
    g.values.set(TOPK_OUTPUTS[1], { name: TOPK_OUTPUTS[1], type: { dtype: 'int64', shape: [...outShape] } });
  }
  if (!fused) return 0;
  g.outputs.splice(g.outputs.indexOf(fused.out), 1, ...TOPK_OUTPUTS);
  return rewrites.apply(g);
}

export const FUSE_PROJECT_TOPK: Pass = {
  name: NAME,
  summary: 'graph output logits = X·W (+ bias)  ⇒  planc.ProjectTopK → topk_logprobs, topk_ids (only with topk set)',
  run(model: Model, ctx: PassContext): Model {
    const k = ctx.topk;
    if (k === undefined) return model;
    if (!Number.isInteger(k) || k < 1) throw new PlancError('PLANC_E301', `topk must be a positive integer, got ${k}`);
    const out = copyModel(model);
    let fused = 0;
    for (const g of out.graphs.values()) fused += fuseGraph(g, out, k, ctx);
    if (fused > 0) out.opsets.planc = 1;
    return out;
  },
};
