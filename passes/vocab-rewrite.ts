// Opt-in (PassContext.vocab): planc.ProjectTopK computes only an active part of the vocabulary (seed 000, seed 002 §4.1).
import { VOCAB_ACTIVE_INPUT, VOCAB_HIDDEN_OUTPUT } from '../compiler/plan/io-names.ts';
import { PlancError } from '../compiler/diagnostics.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { Tensor, transposeMatrix } from '../compiler/tensor.ts';
import {
  addInitializer,
  copyModel,
  freshName,
  GraphView,
  pruneUnused,
  type Pass,
  type PassContext,
  type VocabRewriteOptions,
} from './pass.ts';

const NAME = 'vocab-rewrite';
/** The active mask value (a graph input for shortlists, ClusterMask's output for clusters). */
/** The hidden state output of calibration plans (method 'expose'). */
const CONSTS = {
  centroids: 'vocab_centroids',
  cnorm: 'vocab_cnorm',
  offsets: 'vocab_offsets',
  ids: 'vocab_ids',
} as const;

/** W [D, V] → a new initializer W^T [V, D], so the kernel's gather of active ids reads contiguous rows. */
function transposeWeight(model: Model, g: Graph, node: Node): void {
  const w = node.inputs[1]!;
  const t = model.weights.get(g.initializers.get(w)!)!.tensor;
  const [d, v] = t.dims as [number, number];
  const out = transposeMatrix(t.nums, d, v);
  const name = freshName(g, `${w}_t`);
  addInitializer(model, g, name, new Tensor('float32', [v, d], out));
  node.inputs[1] = name;
  node.attrs = { ...node.attrs, transposed: { kind: 'int', value: 1 } };
}

function rewriteGraph(model: Model, g: Graph, o: VocabRewriteOptions, ctx: PassContext): number {
  const v = new GraphView(g, model);
  const at = v.all('planc.ProjectTopK')[0];
  if (at === undefined) return 0;
  const node = { ...g.nodes[at]!, inputs: [...g.nodes[at]!.inputs] };
  g.nodes[at] = node;
  if (node.inputs[3]) {
    ctx.explain?.(NAME, node.name, 'planc.ProjectTopK already has an active mask');
    return 0;
  }
  const x = node.inputs[0]!;
  if (o.method === 'expose') {
    const out = freshName(g, VOCAB_HIDDEN_OUTPUT);
    g.nodes.splice(at, 0, {
      name: `${node.name}:hidden`,
      op: 'Identity',
      domain: '',
      inputs: [x],
      outputs: [out],
      attrs: {},
      origin: node.origin,
    });
    g.values.set(out, { name: out, type: g.values.get(x)?.type });
    g.outputs.push(out);
    return 1;
  }
  const wName = node.inputs[1]!;
  const wShape = v.shape(wName);
  const transposed = node.attrs.transposed?.kind === 'int' && node.attrs.transposed.value === 1;
  const vocab = wShape?.[transposed ? 0 : 1];
  if (typeof vocab !== 'number') {
    ctx.explain?.(NAME, node.name, 'the vocabulary size is not a number');
    return 0;
  }
  if (g.values.has(VOCAB_ACTIVE_INPUT)) {
    ctx.explain?.(NAME, node.name, `the graph already has a value named ${VOCAB_ACTIVE_INPUT}`);
    return 0;
  }
  if (!transposed && g.initializers.has(wName)) transposeWeight(model, g, node);
  while (node.inputs.length < 3) node.inputs.push('');
  node.inputs[3] = VOCAB_ACTIVE_INPUT;
  g.values.set(VOCAB_ACTIVE_INPUT, { name: VOCAB_ACTIVE_INPUT, type: { dtype: 'uint8', shape: [vocab] } });
  if (o.method === 'shortlist') {
    g.inputs.push(VOCAB_ACTIVE_INPUT);
    pruneUnused(g);
    return 1;
  }
  const d = o.dim,
    r = o.clusters;
  if (o.centroids.length !== r * d || o.cnorm.length !== r || o.offsets.length !== r + 1) {
    throw new PlancError('PLANC_E501', `vocab clusters: centroids/cnorm/offsets sizes do not match R = ${r}, D = ${d}`);
  }
  addInitializer(model, g, CONSTS.centroids, new Tensor('float32', [r, d], o.centroids));
  addInitializer(model, g, CONSTS.cnorm, new Tensor('float32', [r], o.cnorm));
  addInitializer(model, g, CONSTS.offsets, new Tensor('int32', [r + 1], o.offsets));
  addInitializer(model, g, CONSTS.ids, new Tensor('int32', [o.ids.length], o.ids));
  g.nodes.splice(at, 0, {
    name: `${node.name}:clusters`,
    op: 'ClusterMask',
    domain: 'planc',
    inputs: [x, CONSTS.centroids, CONSTS.cnorm, CONSTS.offsets, CONSTS.ids],
    outputs: [VOCAB_ACTIVE_INPUT],
    attrs: { vocab: { kind: 'int', value: vocab } },
    origin: node.origin,
  });
  pruneUnused(g);
  return 1;
}

export const VOCAB_REWRITE: Pass = {
  name: NAME,
  summary:
    'planc.ProjectTopK(X, W, b)  ⇒  ProjectTopK(X, W^T, b, active) with active = graph input vocab_active (shortlist) or planc.ClusterMask(X) (clusters) (only with vocab set)',
  run(model: Model, ctx: PassContext): Model {
    const o = ctx.vocab;
    if (!o) return model;
    const out = copyModel(model);
    out.weights = new Map(out.weights);
    let n = 0;
    for (const g of out.graphs.values()) n += rewriteGraph(out, g, o, ctx);
    if (n > 0) out.opsets.planc = 1;
    return out;
  },
};
