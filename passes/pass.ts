// What every pass is: a named pure function (model, ctx) → model, and the context the driver gives it.
import type { Graph, Model } from '../compiler/ir.ts';

export interface PassContext {
  /** Called when a rule half-matches and declines, with the reason (`planc optimize --explain` prints these). */
  explain?: (pass: string, node: string, why: string) => void;
}

export interface Pass {
  name: string;
  /** One line: what the pass rewrites. */
  summary: string;
  run(model: Model, ctx: PassContext): Model;
}

/** A copy of the model whose graphs (nodes, values, initializer maps) may be changed without touching the input. */
export function copyModel(model: Model): Model {
  const graphs = new Map<string, Graph>();
  for (const [k, g] of model.graphs) {
    graphs.set(k, {
      ...g, inputs: [...g.inputs], outputs: [...g.outputs], nodes: g.nodes.map((n) => ({ ...n, inputs: [...n.inputs], outputs: [...n.outputs] })),
      values: new Map([...g.values].map(([name, v]) => [name, { ...v }])), initializers: new Map(g.initializers),
    });
  }
  return { ...model, graphs, opsets: { ...model.opsets } };
}

/** Consumers of every value: node indices reading it (a graph output counts as a consumer with index -1). */
export function consumers(g: Graph): Map<string, number[]> {
  const c = new Map<string, number[]>();
  g.nodes.forEach((n, i) => n.inputs.forEach((x) => x && c.set(x, [...(c.get(x) ?? []), i])));
  for (const o of g.outputs) c.set(o, [...(c.get(o) ?? []), -1]);
  return c;
}

/** Drops initializers and value entries that no node, input or output uses any more (after a rewrite). */
export function pruneUnused(g: Graph): void {
  const used = new Set([...g.inputs, ...g.outputs, ...g.nodes.flatMap((n) => [...n.inputs, ...n.outputs])]);
  for (const name of [...g.initializers.keys()]) if (!used.has(name)) g.initializers.delete(name);
  for (const name of [...g.values.keys()]) if (!used.has(name)) g.values.delete(name);
}
