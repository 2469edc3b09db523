// What every pass is: a named pure function (model, ctx) → model, and the context the driver gives it.
import { Diagnostics } from '../compiler/diagnostics.ts';
import { inferGraph, type Facts } from '../model/infer/infer.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { toRaw } from '../model/onnx/tensor-proto.ts';
import { weightId } from '../model/weights.ts';
import type { DType } from '../compiler/dtype.ts';
import type { PlanQuantization, PlanVocab } from '../compiler/plan/types.ts';
import type { Dim } from '../compiler/symbolic.ts';
import type { Tensor } from '../compiler/tensor.ts';
import type { VocabSpec } from '../compiler/vocab/spec.ts';
import type { LayerPrecision } from '../compiler/quant/layers.ts';

export interface PassContext {
  /** N of passes/step-tokens.ts: the decoder step takes 1..N new tokens per row (default 1: one token, as exported). */
  stepTokens?: number;
  /**
   * stepTokens is a default, not a request: where the export fixes the step at one token (or has no step over past
   * K/V), step-tokens keeps one token and says why (explain) instead of failing.
   */
  stepTokensDefault?: boolean;
  /** Called when a rule half-matches and declines, with the reason (`planc optimize --explain` prints these). */
  explain?: (pass: string, node: string, why: string) => void;
  /** k of planc.ProjectTopK; the pass runs only when set. */
  topk?: number;
  /** Quantization of the products over constant weights (passes/quantize.ts); the pass runs only when set. */
  quantize?: QuantizeOptions;
  /** The vocabulary rewrite of planc.ProjectTopK (passes/vocab-rewrite.ts); the pass runs only when set. */
  vocab?: VocabRewriteOptions;
  /** What needs the runtime (calibration) and the progress reporter: filled by the compile driver (optimize/compile.ts). */
  services?: PassServices;
}

/**
 * The services of a compile: passes and the driver reach the runtime only through these (passes never import
 * runtime/, codegen/ or native/). optimize/compile.ts fills in the runtime-backed ones a caller does not give.
 */
export interface PassServices {
  /** Where long steps report progress (the CLI draws it on stderr; library code never writes there itself). */
  progress?: ProgressReporter;
  /**
   * The --vocab step: reads the shortlist, or calibrates clusters (greedy decoding of the calibration text on a CPU
   * plan of `model` that exposes planc.ProjectTopK's hidden state, then k-means), then measures quality on held-out
   * text. `model` is the source model, before the IR passes.
   */
  calibrate?: (model: Model, request: VocabRequest) => Promise<VocabResult>;
  /**
   * The --quantize step: the quantize pass's options (for auto: each layer's precision, from its measured error on
   * calibration data and the accuracy gate) and the plan's quantization report. `model` is the source model; `pipe`
   * the IR pipeline's other options (the step builds float32 and quantized plans with them to measure).
   */
  quantize?: (model: Model, request: QuantizeRequest, pipe: PassContext) => Promise<QuantizeResult>;
}

/** What --quantize asks of the quantize service. */
export interface QuantizeRequest {
  /** A precision for every product, or auto (int8 where the gate holds, higher precision where it does not). */
  mode: LayerPrecision | 'auto';
  /** Per node name: its precision instead (overrides auto's choice too). */
  layers?: Readonly<Record<string, LayerPrecision>>;
  /** Source sentences whose products' inputs measure each layer's error (auto; default: the evaluation text). */
  calibrate?: string;
  /** Held-out source text (and references) on which the quantized plan is compared with the float32 plan. */
  evalSrc?: string;
  evalRef?: string;
}

/** The quantize pass's options and what the plan records about them. */
export interface QuantizeResult {
  options: QuantizeOptions;
  header: PlanQuantization;
}

/** Progress of long steps, as the library reports it. */
export interface ProgressReporter {
  /** A new step (ends the one before). */
  start(step: string): void;
  /** Ends the current step. */
  finish(): void;
  /** A counted step of `total` units: tick(n) as units are done, done() at the end. */
  bar(label: string, total: number): ProgressBar;
}

export interface ProgressBar {
  tick(n: number): void;
  done(): void;
}

/** What --vocab asks of the calibrate service. */
export interface VocabRequest {
  spec: VocabSpec;
  /** k of the plan's planc.ProjectTopK. */
  topk: number;
  /** Source sentences to calibrate clusters on, one per line (--calibrate). */
  calibrate?: string;
  /** Held-out source text and its references for the quality report (--eval-src, --eval-ref). */
  evalSrc?: string;
  evalRef?: string;
}

/** The vocab-rewrite pass's options and the plan's vocab header (the shortlist or clusters, and the quality report). */
/** The rewrite (undefined: none, e.g. no --vocab auto point held the gate) and the plan's vocab record. */
export interface VocabResult {
  rewrite?: VocabRewriteOptions;
  header: PlanVocab;
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
      centroids: Float32Array;
      cnorm: Float32Array;
      offsets: Int32Array;
      ids: Int32Array;
      clusters: number;
      dim: number;
    };

export interface Pass {
  name: string;
  /** One line: what the pass rewrites. */
  summary: string;
  run(model: Model, ctx: PassContext): Model;
}

/** What passes/quantize.ts does, and where it does something else. */
export interface QuantizeOptions {
  /** The precision of every product over a constant weight. */
  precision: LayerPrecision;
  /** Per IR node name (a planc.FusedMatMul or planc.ProjectTopK after fusion): its precision instead. */
  layers?: Readonly<Record<string, LayerPrecision>>;
}

/** A value name not yet used in the graph: base, or base_1, base_2, ... */
export function freshName(g: Graph, base: string): string {
  let name = base;
  for (let i = 1; g.values.has(name); i++) name = `${base}_${i}`;
  return name;
}

/** Makes `name` an initializer of g holding t, stored once in the model's weights by content (model/weights.ts weightId). */
export function addInitializer(model: Model, g: Graph, name: string, t: Tensor): void {
  const raw = toRaw(t);
  const id = weightId(t, raw);
  if (!model.weights.has(id)) model.weights.set(id, { id, tensor: t, bytes: raw.length });
  g.initializers.set(name, id);
  g.values.set(name, { name, type: { dtype: t.dtype, shape: [...t.dims] } });
}

/** A copy of the model whose graphs (nodes, values, initializer maps) may be changed without touching the input. */
export function copyModel(model: Model): Model {
  const graphs = new Map<string, Graph>();
  for (const [k, g] of model.graphs) graphs.set(k, copyGraph(g));
  return { ...model, graphs, opsets: { ...model.opsets } };
}

/** A graph a pass may edit: its lists, nodes, values and initializer map copied (tensors shared). */
export function copyGraph(g: Graph): Graph {
  return {
    ...g,
    inputs: [...g.inputs],
    outputs: [...g.outputs],
    nodes: g.nodes.map((n) => ({ ...n, inputs: [...n.inputs], outputs: [...n.outputs] })),
    values: new Map([...g.values].map(([name, v]) => [name, { ...v }])),
    initializers: new Map(g.initializers),
  };
}

/**
 * Reads a graph by value names: producers, consumers, and constants. A constant is an initializer, a Constant node's
 * output, or an Identity of either (exporters alias deduplicated weights through Identity nodes). Given inference
 * facts, shapes, dtypes and known values come from them instead (values computed from shapes included).
 */
export class GraphView {
  readonly producer = new Map<string, number>();
  /** Node indices reading each value, in order (a graph output counts as a reader with index -1). */
  readonly uses = new Map<string, number[]>();
  constructor(
    readonly g: Graph,
    readonly model: Model,
    readonly facts?: Facts,
  ) {
    const use = (x: string, i: number) => (this.uses.get(x) ?? this.uses.set(x, []).get(x)!).push(i);
    g.nodes.forEach((n, i) => {
      n.outputs.forEach((o) => o && this.producer.set(o, i));
      n.inputs.forEach((x) => x && use(x, i));
    });
    for (const o of g.outputs) use(o, -1);
  }
  node(value: string): [number, Node] | undefined {
    const i = this.producer.get(value);
    return i === undefined ? undefined : [i, this.g.nodes[i]!];
  }
  /** Indices of the nodes with op `key` ('Op' in the default domain, 'domain.Op' otherwise), in order. */
  all(key: string): number[] {
    return [...this.g.nodes.keys()].filter((i) => opKey(this.g.nodes[i]!) === key);
  }
  /** The node producing a value when it is the default-domain `op`. */
  prod(value: string, op: string): [number, Node] | undefined {
    const p = this.node(value);
    return p?.[1].op === op && p[1].domain === '' ? p : undefined;
  }
  /** Node indices reading a value (undefined when it is a graph output); with `shapes`, Shape readers are put there instead. */
  readers(value: string, shapes?: number[]): number[] | undefined {
    const out: number[] = [];
    for (const i of this.uses.get(value) ?? []) {
      if (i < 0) return undefined;
      const n = this.g.nodes[i]!;
      if (shapes && n.op === 'Shape' && n.domain === '') shapes.push(i);
      else out.push(i);
    }
    return out;
  }
  /** The only reader of a value (Shape readers set aside into `shapes` when given), or undefined. */
  only(value: string, shapes?: number[]): [number, Node] | undefined {
    const r = this.readers(value, shapes);
    return r?.length === 1 ? [r[0]!, this.g.nodes[r[0]!]!] : undefined;
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
  isConst(value: string): boolean {
    return this.constant(value) !== undefined;
  }
  /** The value of a one-element numeric constant (or known value, with facts), or undefined. */
  scalar(value: string): number | undefined {
    const t = this.facts ? this.facts.get(value)?.value : this.constant(value);
    return t && t.size === 1 && t.dtype !== 'string' ? Number(t.nums[0]) : undefined;
  }
  /** A value's shape and dtype: from facts, else its type's, else a constant's (names aliasing weights may carry no type). */
  shape(value: string): Dim[] | undefined {
    return this.facts
      ? this.facts.get(value)?.shape
      : (this.g.values.get(value)?.type?.shape ?? this.constant(value)?.dims.slice());
  }
  dtype(value: string): DType | undefined {
    return this.facts
      ? this.facts.get(value)?.dtype
      : (this.g.values.get(value)?.type?.dtype ?? this.constant(value)?.dtype);
  }
  rank(value: string): number | undefined {
    return this.shape(value)?.length;
  }
}

/** A node's key in pattern tables: 'Op' in the default domain, 'domain.Op' otherwise. */
export const opKey = (n: Node): string => (n.domain ? `${n.domain}.${n.op}` : n.op);

/** Says why a rule declines (for `--explain`), naming the rule's root node or `at`; returns undefined, for `return explain(…)`. */
export type Explain = (why: string, at?: Node) => undefined;

/** What a rule makes: each replacement's nodes give way to `by` (in order, at the last of them); all apply or none. */
export interface Replacement {
  nodes: number[];
  by: Node | Node[];
}
export type Rewrite = Replacement | Replacement[];

/** A rule matches at its root node (index i) and returns its rewrite, or undefined (declined, said through explain or not). */
export type Rule = (v: GraphView, i: number, explain: Explain) => Rewrite | undefined;

/** A pass's rules by root op (its opKey); tried in order, the first rewrite that applies wins. */
export type Rules = Record<string, Rule[]>;

/**
 * The driver of every pattern table: walks the root nodes (all nodes, in order, unless given) not yet rewritten, tries
 * the rules of each node's op, and collects the first rewrite that applies.
 */
export function applyRules(
  v: GraphView,
  rules: Rules,
  explain: (node: string, why: string) => void,
  roots: Iterable<number> = v.g.nodes.keys(),
): Rewrites {
  const rewrites = new Rewrites();
  for (const i of roots) {
    const n = v.g.nodes[i]!;
    if (rewrites.taken(i)) continue;
    for (const rule of rules[opKey(n)] ?? []) {
      const r = rule(v, i, (why, at = n) => {
        explain(at.name, why);
        return undefined;
      });
      if (r && rewrites.add(r)) break;
    }
  }
  return rewrites;
}

/** Drops the nodes (in place) that no graph output needs, directly or through other nodes. */
export function dropDeadNodes(g: Graph): void {
  const live = new Set(g.outputs);
  const keep = new Array<boolean>(g.nodes.length).fill(false);
  for (let i = g.nodes.length - 1; i >= 0; i--) {
    const n = g.nodes[i]!;
    if (!n.outputs.some((o) => o && live.has(o))) continue;
    keep[i] = true;
    for (const x of n.inputs) if (x) live.add(x);
  }
  g.nodes = g.nodes.filter((_, i) => keep[i]);
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
  taken(i: number): boolean {
    return this.replaced.has(i) || this.removed.has(i);
  }

  /** Replaces the nodes at `indices` by `node` (or several, in order); declines (false) when one is already taken. */
  replace(indices: number[], node: Node | Node[]): boolean {
    if (indices.some((k) => this.taken(k))) return false;
    const last = Math.max(...indices);
    this.replaced.set(last, Array.isArray(node) ? node : [node]);
    for (const k of indices) if (k !== last) this.removed.add(k);
    return true;
  }

  /** Makes every replacement of a rule's rewrite, or none when one of their nodes is already taken. */
  add(r: Rewrite): boolean {
    const all = Array.isArray(r) ? r : [r];
    if (all.some((x) => x.nodes.some((k) => this.taken(k)))) return false;
    for (const x of all) this.replace(x.nodes, x.by);
    return true;
  }

  /** Applies the rewrites to g; returns how many rewrites were made. */
  apply(g: Graph): number {
    if (this.replaced.size === 0) return 0;
    g.nodes = g.nodes.flatMap((n, i) => (this.removed.has(i) ? [] : (this.replaced.get(i) ?? [n])));
    // Constants (and Identity aliases of weights or constants) that only the replaced nodes read go with them:
    // aliases first, then what they aliased.
    for (let round = 0; round < 2; round++) {
      const read = new Set([...g.outputs, ...g.nodes.flatMap((n) => n.inputs)]);
      const constants = new Set(
        g.nodes.filter((n) => n.op === 'Constant' && n.domain === '').flatMap((n) => n.outputs),
      );
      const constantSource = (n: Node) =>
        n.domain === '' &&
        (n.op === 'Constant' ||
          (n.op === 'Identity' && (g.initializers.has(n.inputs[0]!) || constants.has(n.inputs[0]!))));
      g.nodes = g.nodes.filter((n) => !(constantSource(n) && n.outputs.every((o) => !read.has(o))));
    }
    for (const n of [...this.replaced.values()].flat())
      for (const o of n.outputs) if (o && !g.values.has(o)) g.values.set(o, { name: o });
    pruneUnused(g);
    return this.replaced.size;
  }
}

/** A pass from a per-graph rewrite: copies the model, rewrites every graph, declares the planc domain if used. */
export function graphPass(
  name: string,
  summary: string,
  fuseGraph: (g: Graph, model: Model, ctx: PassContext) => number,
): Pass {
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

/** A fusion pass from its pattern table, applied to every graph (viewed through inference facts when `infer` is set). */
export function fusionPass(name: string, summary: string, rules: Rules, infer = false): Pass {
  return graphPass(name, summary, (g, model, ctx) => {
    const facts = infer ? inferGraph(model, g, { annotate: false }, new Diagnostics()) : undefined;
    return applyRules(new GraphView(g, model, facts), rules, (node, why) => ctx.explain?.(name, node, why)).apply(g);
  });
}
