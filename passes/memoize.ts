// Memoization of constant nodes (seed 002 §4.3): a node whose inputs are all constants is computed once at optimize
// time and its outputs become weights, stored once by content across the plan's graphs.
import type { Graph, MemoizedNode, Model, Node } from '../compiler/ir.ts';
import { makeOpContext } from '../model/ops/context.ts';
import { findHandler } from '../model/ops/table.ts';
import type { Tensor } from '../compiler/tensor.ts';
import { addInitializer, copyModel, type Pass, type PassContext } from './pass.ts';

const NAME = 'memoize';

/** Ops never computed ahead: random or control flow (their results are not a function of their inputs alone). */
const NOT_MEMOIZED = /^(Random.*|Bernoulli|Multinomial|If|Loop|Scan|SequenceMap)$/;

/** A result larger than this many times its inputs (and than MIN_INFLATE bytes) stays computed at run time. */
const MAX_INFLATION = 4;
const MIN_INFLATE = 64 << 10;

/** The memo of one pass run: op, attributes and input weight ids → the output weight ids. */
type Memo = Map<string, Tensor[]>;

function memoKey(model: Model, g: Graph, n: Node): string {
  const ins = n.inputs.map((x) => (x ? g.initializers.get(x) : ''));
  return JSON.stringify([n.domain, n.op, model.opsets[n.domain] ?? 1, n.attrs, ins]);
}

function isConstantInput(g: Graph, x: string): boolean {
  return x === '' || g.initializers.has(x);
}

/** The node's outputs, computed by the reference evaluator (undefined when it declines or fails). */
function evaluate(model: Model, g: Graph, n: Node): Tensor[] | undefined {
  const opset = model.opsets[n.domain] ?? 1;
  const handler = findHandler(n.domain, n.op, opset);
  if (!handler) return undefined;
  const inputs = n.inputs.map((x) => (x ? model.weights.get(g.initializers.get(x)!)!.tensor : undefined));
  const ctx = {
    ...makeOpContext(n, opset, 'PLANC_E202', g.name),
    runSubgraph: (): never => {
      throw new Error('no subgraphs while memoizing');
    },
  };
  try {
    return handler.eval(ctx, inputs);
  } catch {
    return undefined; // inference has judged the node already; one that cannot be computed ahead stays a kernel
  }
}

const tensorBytes = (t: Tensor) => (t.dtype === 'string' ? 0 : t.size * (t.nums.BYTES_PER_ELEMENT ?? 1));

function memoizeGraph(model: Model, g: Graph, memo: Memo, done: MemoizedNode[], ctx: PassContext): void {
  const outputs = new Set(g.outputs);
  const kept: Node[] = [];
  for (const n of g.nodes) {
    const eligible =
      n.inputs.some((x) => x) &&
      n.inputs.every((x) => isConstantInput(g, x)) &&
      !NOT_MEMOIZED.test(n.op) &&
      !Object.values(n.attrs).some((a) => a.kind === 'graph' || a.kind === 'graphs') &&
      !n.outputs.some((o) => outputs.has(o));
    if (!eligible) {
      kept.push(n);
      continue;
    }
    const key = memoKey(model, g, n);
    const known = memo.get(key);
    const outs = known ?? evaluate(model, g, n);
    if (!outs || outs.length < n.outputs.filter((o) => o).length) {
      kept.push(n);
      continue;
    }
    const inBytes = n.inputs.reduce(
      (s, x) => s + (x ? tensorBytes(model.weights.get(g.initializers.get(x)!)!.tensor) : 0),
      0,
    );
    const outBytes = outs.reduce((s, t) => s + tensorBytes(t), 0);
    if (outBytes > MIN_INFLATE && outBytes > MAX_INFLATION * inBytes) {
      ctx.explain?.(
        NAME,
        n.name,
        `its result (${outBytes} bytes) is over ${MAX_INFLATION}× its inputs: computed at run time`,
      );
      kept.push(n);
      continue;
    }
    memo.set(key, outs);
    n.outputs.forEach((o, k) => o && addInitializer(model, g, o, outs[k]!));
    done.push({
      graph: g.name,
      node: n.name,
      op: n.domain ? `${n.domain}.${n.op}` : n.op,
      bytes: outBytes,
      reused: !!known,
    });
  }
  g.nodes = kept;
}

export const MEMOIZE: Pass = {
  name: NAME,
  summary:
    'a node whose inputs are all constants  ⇒  its outputs as weights, computed once (equal results stored once across graphs)',
  run(model: Model, ctx: PassContext): Model {
    const m = copyModel(model);
    const memo: Memo = new Map();
    const done: MemoizedNode[] = [...(model.memoized ?? [])];
    for (const g of m.graphs.values()) memoizeGraph(m, g, memo, done, ctx);
    m.memoized = done;
    return m;
  },
};
