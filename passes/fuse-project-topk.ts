// Opt-in (PassContext.topk): a logits graph output X·W (+ bias [V] or [1, V]) becomes planc.ProjectTopK's k best log-probs and ids.
import { TOPK_IDS_OUTPUT, TOPK_LOGPROBS_OUTPUT } from '../compiler/plan/io-names.ts';
import { PlancError } from '../compiler/diagnostics.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { dimEq, type Dim } from '../compiler/symbolic.ts';
import {
  applyRules,
  copyModel,
  freshName,
  GraphView,
  type Explain,
  type Pass,
  type PassContext,
  type Rewrite,
  type Rules,
} from './pass.ts';

const NAME = 'fuse-project-topk';
/** The graph outputs that replace the logits output, in this order. */
const TOPK_OUTPUTS = [TOPK_LOGPROBS_OUTPUT, TOPK_IDS_OUTPUT] as const;

/** A constant 2-D float32 initializer? */
function weight2d(v: GraphView, value: string): boolean {
  return v.g.initializers.has(value) && v.dtype(value) === 'float32' && v.rank(value) === 2;
}

/** The weight behind MatMul's B: an initializer [D, V], or Transpose of an initializer [V, D] (transposed = 1). */
function weightOf(v: GraphView, b: string): { w: string; transposed: number; nodes: number[] } | string {
  if (weight2d(v, b)) return { w: b, transposed: 0, nodes: [] };
  const t = v.prod(b, 'Transpose');
  if (!t || !weight2d(v, t[1].inputs[0]!)) return 'the weight is not a constant 2-D tensor (nor the Transpose of one)';
  const perm = t[1].attrs.perm;
  if (perm && !(perm.kind === 'ints' && perm.value.join() === '1,0'))
    return 'the weight is a Transpose with a perm other than [1, 0]';
  const e = t[1].inputs[0]!;
  // The Transpose goes with the fusion only when the MatMul is its only reader.
  return { w: e, transposed: 1, nodes: (v.uses.get(b) ?? []).length === 1 ? [t[0]] : [] };
}

/**
 * The rules of one graph, rooted at what produces a graph output: MatMul, MatMul + bias Add, or planc.FusedMatMul
 * without activation or residual. The first output fused is noted in `fused`; later ones are declined.
 */
function logitsRules(k: number, fused: { out?: string; shape?: Dim[] }): Rules {
  /** The logits X·W (+ bias) at the root node i, where `mm` is the MatMul and `nodes` the others the fusion takes. */
  const logits = (
    v: GraphView,
    i: number,
    explain: Explain,
    mm: [number, Node],
    bias: string,
    nodes: number[],
  ): Rewrite | undefined => {
    const producer = v.g.nodes[i]!;
    const out = producer.outputs[0]!;
    if ((v.uses.get(out) ?? []).length !== 1) return explain(`the logits '${out}' have other consumers`);
    const w = weightOf(v, mm[1].inputs[1]!);
    if (typeof w === 'string') return explain(w, mm[1]);
    const x = mm[1].inputs[0]!;
    if (v.dtype(x) !== 'float32' || (v.rank(x) ?? 0) < 2)
      return explain('X is not a float32 tensor of rank ≥ 2', mm[1]);
    const vocab = v.shape(w.w)![w.transposed ? 0 : 1]!;
    if (bias) {
      const bs = v.shape(bias);
      const flat = bs && bs.length >= 1 && bs.slice(0, -1).every((d) => d === 1) && dimEq(bs[bs.length - 1]!, vocab);
      if (v.dtype(bias) !== 'float32' || !flat)
        return explain(`the bias is not float32 [${vocab}] (or [1, ..., ${vocab}])`);
    }
    const shape = v.g.values.get(out)?.type?.shape;
    if (fused.out) return explain(`only one output per graph becomes planc.ProjectTopK ('${fused.out}' already did)`);
    if (typeof vocab === 'number' && k > vocab) return explain(`k = ${k} exceeds the vocabulary size ${vocab}`);
    if (!shape) return explain(`the logits '${out}' have an unknown shape`);
    if (TOPK_OUTPUTS.some((name) => v.g.values.has(name)))
      return explain(`the graph already has a value named ${TOPK_OUTPUTS.join(' or ')}`);
    const all = [...w.nodes, mm[0], ...nodes];
    const origin = all.flatMap((j) => v.g.nodes[j]!.origin);
    // A [1, ..., V] bias (final_logits_bias) is read as [V] through a Squeeze (a view).
    const squeeze: Node[] =
      (v.rank(bias) ?? 1) > 1
        ? [
            {
              name: `${producer.name}:bias`,
              op: 'Squeeze',
              domain: '',
              inputs: [bias],
              outputs: [freshName(v.g, `${bias}_squeezed`)],
              attrs: {},
              origin,
            },
          ]
        : [];
    const b = squeeze[0]?.outputs[0] ?? bias;
    Object.assign(fused, { out, shape });
    return {
      nodes: all,
      by: [
        ...squeeze,
        {
          name: `${producer.name}:topk`,
          op: 'ProjectTopK',
          domain: 'planc',
          inputs: b ? [x, w.w, b] : [x, w.w],
          outputs: [...TOPK_OUTPUTS],
          attrs: { k: { kind: 'int', value: k }, transposed: { kind: 'int', value: w.transposed } },
          origin,
        },
      ],
    };
  };
  return {
    MatMul: [(v, i, explain) => logits(v, i, explain, [i, v.g.nodes[i]!], '', [])],
    Add: [
      (v, i, explain) => {
        const n = v.g.nodes[i]!;
        const j = n.inputs.findIndex((x) => v.prod(x, 'MatMul'));
        if (j < 0) return undefined;
        const mm = v.node(n.inputs[j]!)!;
        if (!v.isConst(n.inputs[1 - j] ?? '')) return explain('the Add after the MatMul is not a constant bias');
        if ((v.uses.get(n.inputs[j]!) ?? []).length !== 1)
          return explain('the MatMul result has other consumers than the bias Add', mm[1]);
        return logits(v, i, explain, mm, n.inputs[1 - j] ?? '', [i]);
      },
    ],
    'planc.FusedMatMul': [
      (v, i, explain) => {
        const n = v.g.nodes[i]!;
        const act = n.attrs.activation;
        if (act && !(act.kind === 'string' && act.value === 'none'))
          return explain('the FusedMatMul has an activation');
        if (n.inputs[3]) return explain('the FusedMatMul adds a residual');
        return logits(v, i, explain, [i, n], n.inputs[2] ?? '', []);
      },
    ],
  };
}

function fuseGraph(g: Graph, model: Model, k: number, ctx: PassContext): number {
  const v = new GraphView(g, model);
  const fused: { out?: string; shape?: Dim[] } = {};
  const roots = g.outputs.flatMap((o) => v.node(o)?.[0] ?? []);
  const rewrites = applyRules(v, logitsRules(k, fused), (node, why) => ctx.explain?.(NAME, node, why), roots);
  if (!fused.out) return 0;
  const outShape = [...fused.shape!.slice(0, -1), k];
  g.values.set(TOPK_OUTPUTS[0], { name: TOPK_OUTPUTS[0], type: { dtype: 'float32', shape: outShape } });
  g.values.set(TOPK_OUTPUTS[1], { name: TOPK_OUTPUTS[1], type: { dtype: 'int64', shape: [...outShape] } });
  g.outputs.splice(g.outputs.indexOf(fused.out), 1, ...TOPK_OUTPUTS);
  return rewrites.apply(g);
}

export const FUSE_PROJECT_TOPK: Pass = {
  name: NAME,
  summary: 'graph output logits = X·W (+ bias)  ⇒  planc.ProjectTopK → topk_logprobs, topk_ids (only with topk set)',
  run(model: Model, ctx: PassContext): Model {
    const k = ctx.topk;
    if (k === undefined) return model;
    if (!Number.isInteger(k) || k < 1) throw new PlancError('PLANC_E302', `topk must be a positive integer, got ${k}`);
    const out = copyModel(model);
    let fused = 0;
    for (const g of out.graphs.values()) fused += fuseGraph(g, out, k, ctx);
    if (fused > 0) out.opsets.planc = 1;
    return out;
  },
};
