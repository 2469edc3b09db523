// What every pass is: a named pure function (model, ctx) → model, and the context the driver gives it.
import type { Graph, Model, Node } from '../compiler/ir.ts';
import type { DType } from '../compiler/dtype.ts';
import type { Dim } from '../compiler/symbolic.ts';
import type { Tensor } from '../compiler/tensor.ts';

export interface PassContext {
  /** Called when a rule half-matches and declines, with the reason (`planc optimize --explain` prints these). */
  explain?: (pass: string, node: string, why: string) => void;
  /** k of planc.ProjectTopK; the pass runs only when set. */
  topk?: number;
  /** The vocabulary rewrite of planc.ProjectTopK (passes/vocab-rewrite.ts); the pass runs only when set. */
  vocab?: VocabRewriteOptions;
}

/**
 * What passes/vocab-rewrite.ts does to every graph with a planc.ProjectTopK:
 * - shortlist: a graph input `vocab_active` (uint8 [V], fed per batch by the runtime) becomes its active mask;
 * - clusters: a planc.ClusterMask over the same hidden state, with the centroids and active sets as constants;
 * - expose: no mask; its hidden state X becomes an extra graph output `vocab_hidden` (calibration builds this plan).
 */
export type VocabRewriteOptions =
  | { method: 'shortlist' }
  | { method: 'expose' }
  | {
    method: 'clusters';
    /** [R, D] row-major, ‖C_r‖² [R], and the active sets as CSR (offsets [R + 1], sorted ids per cluster). */
    centroids: Float32Array; cnorm: Float32Array; offsets: Int32Array; ids: Int32Array;
    clusters: number; dim: number;
  };

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

/**
 * Reads a graph by value names: producers, consumers, and constants. A constant is an initializer, a Constant node's
 * output, or an Identity of either (exporters alias deduplicated weights through Identity nodes).
 */
export class GraphView {
  readonly producer = new Map<string, number>();
  readonly uses: Map<string, number[]>;
  constructor(readonly g: Graph, readonly model: Model) {
    g.nodes.forEach((n, i) => n.outputs.forEach((o) => o && this.producer.set(o, i)));
    this.uses = consumers(g);
  }
  node(value: string): [number, Node] | undefined {
    const i = this.producer.get(value);
    return i === undefined ? undefined : [i, this.g.nodes[i]!];
  }
  /** The only consumer of a value (none when it is a graph output or has several). */
  only(value: string): [number, Node] | undefined {
    const u = this.uses.get(value) ?? [];
    return u.length === 1 && u[0]! >= 0 ? [u[0]!, this.g.nodes[u[0]!]!] : undefined;
  }
  /** The tensor of a constant value, or undefined. */
  constant(value: string): Tensor | undefined {
    for (let v = value, hops = 0; hops < 8; hops++) {
      const id = this.g.initializers.get(v);
      if (id) return this.model.weights.get(id)?.tensor;
      const p = this.node(v)?.[1];
      if (p?.domain !== '') return undefined;
      if (p.op === 'Constant') return p.attrs.value?.kind === 'tensor' ? p.attrs.value.value : undefined;
      if (p.op !== 'Identity') return undefined;
      v = p.inputs[0]!;
    }
    return undefined;
  }
  isConst(value: string): boolean { return this.constant(value) !== undefined; }
  /** The value of a one-element numeric constant, or undefined. */
  scalar(value: string): number | undefined {
    const t = this.constant(value);
    return t && t.size === 1 && t.dtype !== 'string' ? Number(t.nums[0]) : undefined;
  }
  /** A value's shape and dtype: its type's, else a constant's (names aliasing weights may carry no type). */
  shape(value: string): Dim[] | undefined { return this.g.values.get(value)?.type?.shape ?? this.constant(value)?.dims.slice(); }
  dtype(value: string): DType | undefined { return this.g.values.get(value)?.type?.dtype ?? this.constant(value)?.dtype; }
  rank(value: string): number | undefined { return this.shape(value)?.length; }
}

/** Drops initializers and value entries that no node, input or output uses any more (after a rewrite). */
export function pruneUnused(g: Graph): void {
  const used = new Set([...g.inputs, ...g.outputs, ...g.nodes.flatMap((n) => [...n.inputs, ...n.outputs])]);
  for (const name of [...g.initializers.keys()]) if (!used.has(name)) g.initializers.delete(name);
  for (const name of [...g.values.keys()]) if (!used.has(name)) g.values.delete(name);
}

/**
 * Collects "these nodes become this one" rewrites of a graph, then applies them: the new node takes the place of the
 * last node it replaces (all its inputs exist by then), the others go, and unused values are pruned.
 */
export class Rewrites {
  private readonly replaced = new Map<number, Node[]>();
  private readonly removed = new Set<number>();

  /** Whether node i is already part of a rewrite. */
  taken(i: number): boolean { return this.replaced.has(i) || this.removed.has(i); }

  /** Replaces the nodes at `indices` by `node` (or several, in order); declines (false) when one is already taken. */
  replace(indices: number[], node: Node | Node[]): boolean {
    if (indices.some((k) => this.taken(k))) return false;
    const last = Math.max(...indices);
    this.replaced.set(last, Array.isArray(node) ? node : [node]);
    for (const k of indices) if (k !== last) this.removed.add(k);
    return true;
  }

  /** Applies the rewrites to g; returns how many rewrites were made. */
  apply(g: Graph): number {
    if (this.replaced.size === 0) return 0;
    g.nodes = g.nodes.flatMap((n, i) => (this.removed.has(i) ? [] : this.replaced.get(i) ?? [n]));
    // Constants (and Identity aliases of weights or constants) that only the replaced nodes read go with them:
    // aliases first, then what they aliased.
    for (let round = 0; round < 2; round++) {
      const read = new Set([...g.outputs, ...g.nodes.flatMap((n) => n.inputs)]);
      const constants = new Set(g.nodes.filter((n) => n.op === 'Constant' && n.domain === '').flatMap((n) => n.outputs));
      const constantSource = (n: Node) => n.domain === '' && (n.op === 'Constant' || (n.op === 'Identity' && (g.initializers.has(n.inputs[0]!) || constants.has(n.inputs[0]!))));
      g.nodes = g.nodes.filter((n) => !(constantSource(n) && n.outputs.every((o) => !read.has(o))));
    }
    for (const n of [...this.replaced.values()].flat()) for (const o of n.outputs) if (o && !g.values.has(o)) g.values.set(o, { name: o });
    pruneUnused(g);
    return this.replaced.size;
  }
}

/** A fusion pass from a per-graph rewrite: copies the model, rewrites every graph, declares the planc domain if used. */
export function fusionPass(name: string, summary: string, fuseGraph: (g: Graph, model: Model, ctx: PassContext) => number): Pass {
  return {
    name,
    summary,
    run(model, ctx) {
      const out = copyModel(model);
      let fused = 0;
      for (const g of out.graphs.values()) fused += fuseGraph(g, out, ctx);
      if (fused > 0) out.opsets.planc = 1;
      return out;
    },
  };
}
