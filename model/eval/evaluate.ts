// The reference evaluator: runs a graph node by node with the operator table's exact ONNX semantics.
import { PlancError } from '../../compiler/diagnostics.ts';
import type { Graph, Model } from '../../compiler/ir.ts';
import { makeOpContext } from '../ops/context.ts';
import { findHandler } from '../ops/table.ts';
import type { EvalContext } from '../ops/types.ts';
import { dimEval, dimStr } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';

/** Values visible to a graph: its own, then its enclosing graphs' (If branches read outer values). */
class Scope {
  readonly env = new Map<string, Tensor>();
  constructor(readonly parent?: Scope) {}
  get(name: string): Tensor | undefined {
    return this.env.get(name) ?? this.parent?.get(name);
  }
}

export interface EvalOptions {
  /** Called after each node with its outputs (for tracing and debugging). */
  onNode?: (node: string, outputs: Tensor[]) => void;
}

/** Runs a graph of a model on feeds (by input name); returns the graph outputs by name. */
export function evaluate(
  model: Model,
  graphName: string,
  feeds: Record<string, Tensor>,
  opts: EvalOptions = {},
): Record<string, Tensor> {
  const graph = model.graphs.get(graphName);
  if (!graph)
    throw new PlancError(
      'PLANC_E204',
      `model has no graph '${graphName}' (it has ${[...model.graphs.keys()].join(', ')})`,
    );
  checkFeeds(graph, feeds);
  const scope = new Scope();
  for (const [name, t] of Object.entries(feeds)) scope.env.set(name, t);
  const outs = runGraph(model, graph, scope, opts);
  return Object.fromEntries(graph.outputs.map((o, i) => [o, outs[i]!]));
}

/** Refuses missing feeds and feeds whose dtype, rank or fixed dims disagree with the graph's declared inputs. */
function checkFeeds(graph: Graph, feeds: Record<string, Tensor>): void {
  const bind = new Map<string, number>();
  for (const name of graph.inputs) {
    const t = feeds[name];
    const where = { graph: graph.name, node: name, stage: 'evaluation' };
    if (!t) throw new PlancError('PLANC_E204', `missing feed for input '${name}'`, where);
    const type = graph.values.get(name)?.type;
    if (!type) continue;
    if (type.dtype !== t.dtype)
      throw new PlancError('PLANC_E204', `input '${name}' wants ${type.dtype}, got ${t.dtype}`, where);
    if (!type.shape) continue;
    if (type.shape.length !== t.rank)
      throw new PlancError(
        'PLANC_E204',
        `input '${name}' wants rank ${type.shape.length}, got dims [${t.dims}]`,
        where,
      );
    type.shape.forEach((d, i) => {
      if (typeof d !== 'number' && d.terms.size === 1 && [...d.terms.keys()][0] !== '' && !bind.has(d.key))
        bind.set(d.key, t.dims[i]!);
      const want = dimEval(d, bind);
      if (want !== undefined && want !== t.dims[i]) {
        throw new PlancError(
          'PLANC_E204',
          `input '${name}' wants dims [${type.shape!.map(dimStr)}], got [${t.dims}] (dim ${i} is ${t.dims[i]}, expected ${want})`,
          where,
        );
      }
    });
  }
}

/** Last node index reading each value, so intermediates are dropped as soon as they are dead. */
function lastUses(graph: Graph): Map<string, number> {
  const last = new Map<string, number>();
  graph.nodes.forEach((n, i) => {
    for (const x of n.inputs) if (x) last.set(x, i);
    for (const a of Object.values(n.attrs)) if (a.kind === 'graph') for (const x of outerReads(a.value)) last.set(x, i);
  });
  for (const o of graph.outputs) last.set(o, Infinity);
  return last;
}

/** Names a subgraph reads from enclosing scopes. */
export function outerReads(g: Graph): Set<string> {
  const defined = new Set<string>([...g.inputs, ...g.initializers.keys()]);
  const reads = new Set<string>();
  for (const n of g.nodes) {
    for (const x of n.inputs) if (x && !defined.has(x)) reads.add(x);
    for (const a of Object.values(n.attrs))
      if (a.kind === 'graph') for (const x of outerReads(a.value)) if (!defined.has(x)) reads.add(x);
    for (const o of n.outputs) defined.add(o);
  }
  for (const o of g.outputs) if (!defined.has(o)) reads.add(o);
  return reads;
}

function runGraph(model: Model, graph: Graph, scope: Scope, opts: EvalOptions): Tensor[] {
  for (const [name, id] of graph.initializers) {
    if (!scope.env.has(name)) scope.env.set(name, model.weights.get(id)!.tensor);
  }
  const last = lastUses(graph);
  graph.nodes.forEach((node, i) => {
    const where = { graph: graph.name, node: node.name, op: node.op, stage: 'evaluation' };
    const inputs = node.inputs.map((x) => {
      if (!x) return undefined;
      const t = scope.get(x);
      if (!t) throw new PlancError('PLANC_E102', `input '${x}' of node '${node.name}' has no value`, where);
      return t;
    });
    const opset = model.opsets[node.domain] ?? 1;
    const handler = findHandler(node.domain, node.op, opset);
    if (!handler)
      throw new PlancError(
        'PLANC_E005',
        `unsupported operator ${node.domain ? node.domain + '.' : ''}${node.op} at opset ${opset}`,
        where,
      );
    const ctx: EvalContext = {
      ...makeOpContext(node, opset, 'PLANC_E202', graph.name),
      runSubgraph: (g, feeds) => {
        const sub = new Scope(scope);
        g.inputs.forEach((n, k) => feeds?.[k] && sub.env.set(n, feeds[k]));
        return runGraph(model, g, sub, opts);
      },
    };
    let outs: Tensor[];
    try {
      outs = handler.eval(ctx, inputs);
    } catch (e) {
      if (e instanceof PlancError) throw e;
      const err = new PlancError('PLANC_E202', `internal error: ${(e as Error).message}`, where);
      (err as { internal?: boolean }).internal = true;
      err.stack = (e as Error).stack;
      throw err;
    }
    node.outputs.forEach((o, k) => {
      if (!o) return;
      const t = outs[k];
      if (!t) throw new PlancError('PLANC_E202', `produced no value for output ${k} ('${o}')`, where);
      scope.env.set(o, t);
    });
    opts.onNode?.(node.name, outs);
    for (const x of node.inputs)
      if (x && last.get(x) === i && scope.env.has(x) && !graph.initializers.has(x)) scope.env.delete(x);
  });
  return graph.outputs.map((o) => {
    const t = scope.get(o);
    if (!t) throw new PlancError('PLANC_E106', `graph output '${o}' was never computed`, { graph: graph.name });
    return t;
  });
}
