// Sentences joining a running batch (issue 27) need only their encoder K/V from the first decoder step: this pass cuts
// the first step (`decoder`) to its present.*.encoder.* outputs and the nodes they need, and adds it as
// decoder_cross_kv, which takes the first step's feeds (those it still reads: encoder_hidden_states, and often
// input_ids or the mask through Shape only). The joiners' first token then comes from the batch's next step at past
// length 0, which computes it as the first step does (the same nodes over the same weights), so a start no longer pays
// a whole step (its vocabulary projection) of its own. It runs last, after quantization, so the cut nodes are the first
// step's own kernels. Declines (--explain) where there is no per-row step to join (no decoder_with_past_rows) or no
// encoder K/V output.
import { CROSS_KV_GRAPH, ROWS_STEP_GRAPH } from '../compiler/plan/io-names.ts';
import { copyGraph, copyModel, dropDeadNodes, pruneUnused, type Pass, type PassContext } from './pass.ts';
import type { Model } from '../compiler/ir.ts';

const NAME = 'cross-kv';
/** The first decoder step this pass cuts. */
const FIRST_STEP_GRAPH = 'decoder';

/** Adds decoder_cross_kv to a model that has the per-row step graph; otherwise leaves it as it is, saying why. */
export function addCrossKvGraph(model: Model, ctx: PassContext): Model {
  const first = model.graphs.get(FIRST_STEP_GRAPH);
  if (!first || model.graphs.has(CROSS_KV_GRAPH)) return model;
  const decline = (why: string): Model => {
    ctx.explain?.(NAME, first.name, `${why}; no ${CROSS_KV_GRAPH} (joining sentences run a whole first step)`);
    return model;
  };
  if (!model.graphs.has(ROWS_STEP_GRAPH)) return decline(`there is no ${ROWS_STEP_GRAPH} for sentences to join`);
  const outputs = first.outputs.filter((o) => o.startsWith('present.') && o.includes('.encoder.'));
  if (outputs.length === 0) return decline('the first step outputs no encoder K/V (present.*.encoder.*)');
  const g = { ...copyGraph(first), name: CROSS_KV_GRAPH, outputs };
  dropDeadNodes(g);
  const read = new Set([...g.outputs, ...g.nodes.flatMap((n) => n.inputs)]);
  g.inputs = g.inputs.filter((i) => read.has(i));
  pruneUnused(g);
  const out = copyModel(model);
  out.graphs.set(CROSS_KV_GRAPH, g);
  return out;
}

export const CROSS_KV: Pass = {
  name: NAME,
  summary: `decoder with present.*.encoder.* outputs and a ${ROWS_STEP_GRAPH}  ⇒  + ${CROSS_KV_GRAPH} (the first step cut to its encoder K/V)`,
  run: addCrossKvGraph,
};
