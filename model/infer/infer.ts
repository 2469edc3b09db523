// Shape and dtype inference with symbols: walks graphs in order, asks each op's handler, folds constants and shape math.
import { Diagnostics, PlancError } from '../../compiler/diagnostics.ts';
import { isInt } from '../../compiler/dtype.ts';
import type { Graph, Model, ValueType } from '../../compiler/ir.ts';
import { makeOpContext } from '../ops/context.ts';
import { findHandler } from '../ops/table.ts';
import type { EvalContext, InferContext, InferInput, InferOutput } from '../ops/types.ts';
import { dimEq, dimStr, isSym, shapeStr, type Dim } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';

/** Constants up to this many elements are folded during inference (shape math, small tables). */
const FOLD_LIMIT = 4096;
/** Integer tensors up to this many elements carry their elements as Dims. */
const SYM_LIMIT = 64;

/** What inference knows about every value of one graph (its subgraphs have their own). */
export type Facts = Map<string, InferInput>;

class FactScope {
  readonly facts: Facts = new Map();
  constructor(readonly parent?: FactScope) {}
  get(name: string): InferInput | undefined {
    return this.facts.get(name) ?? this.parent?.get(name);
  }
}

export interface InferOptions {
  /** Overrides of the declared input types (e.g. concrete shapes for a run). */
  inputTypes?: Record<string, ValueType>;
  /** Write the inferred types into the graph's values (default true). */
  annotate?: boolean;
}

/** Infers every graph of a model; annotates values with their types; throws one error listing every problem. */
export function inferModel(model: Model, opts: InferOptions = {}): Map<string, Facts> {
  const all = new Map<string, Facts>();
  const diags = new Diagnostics();
  for (const [name, g] of model.graphs) all.set(name, inferGraph(model, g, opts, diags));
  diags.throwIfAny();
  return all;
}

/** Infers one graph, collecting problems in diags instead of stopping at the first. */
export function inferGraph(
  model: Model,
  graph: Graph,
  opts: InferOptions,
  diags: Diagnostics,
  parent?: FactScope,
): Facts {
  const scope = new FactScope(parent);
  for (const [name, id] of graph.initializers) scope.facts.set(name, withSym(constFact(model.weights.get(id)!.tensor)));
  for (const name of graph.inputs) {
    const t = opts.inputTypes?.[name] ?? graph.values.get(name)?.type;
    if (t)
      scope.facts.set(
        name,
        t.sym ? { dtype: t.dtype, shape: t.shape, sym: t.sym } : { dtype: t.dtype, shape: t.shape },
      );
  }
  for (const node of graph.nodes) {
    const where = { graph: graph.name, node: node.name, op: node.op, stage: 'inference' };
    const inputs: (InferInput | undefined)[] = [];
    let ready = true;
    for (const x of node.inputs) {
      if (!x) {
        inputs.push(undefined);
        continue;
      }
      const f = scope.get(x);
      if (!f) {
        if (!isDefinedSomewhere(graph, x, scope))
          diags.add(new PlancError('PLANC_E102', `input '${x}' is never defined`, where));
        ready = false;
        break;
      }
      inputs.push(f);
    }
    if (!ready) continue;
    const opset = model.opsets[node.domain] ?? 1;
    const handler = findHandler(node.domain, node.op, opset);
    if (!handler) {
      diags.add(new PlancError('PLANC_E005', `unsupported operator at opset ${opset}`, where));
      continue;
    }
    const base = makeOpContext(node, opset, 'PLANC_E201', graph.name);
    const ctx: InferContext = {
      ...base,
      inferSubgraph: (g, types) => {
        const local = new Diagnostics();
        const inputTypes = types
          ? Object.fromEntries(g.inputs.map((n, k) => [n, types[k]!]).filter(([, t]) => t))
          : undefined;
        const sub = inferGraph(model, g, { annotate: opts.annotate, inputTypes }, local, scope);
        local.throwIfAny();
        return g.outputs.map((o) => {
          const f = sub.get(o) ?? scope.get(o);
          if (!f) return base.fail(`subgraph ${g.name} output '${o}' has no type`);
          return { dtype: f.dtype, shape: f.shape };
        });
      },
    };
    let outs: InferOutput[];
    try {
      outs = handler.infer(ctx, inputs);
    } catch (e) {
      diags.add(
        e instanceof PlancError ? e : new PlancError('PLANC_E201', `internal error: ${(e as Error).message}`, where),
      );
      continue;
    }
    const folded = tryFold(model, handler.eval.bind(handler), ctx, inputs);
    node.outputs.forEach((o, k) => {
      if (!o) return;
      const out = outs[k];
      if (!out) {
        diags.add(new PlancError('PLANC_E201', `no type for output ${k} ('${o}')`, where));
        return;
      }
      const fact: InferInput = folded?.[k]
        ? constFact(folded[k]!)
        : { dtype: out.dtype, shape: out.shape, sym: out.sym };
      if (folded?.[k] && out.dtype !== folded[k]!.dtype) {
        diags.add(
          new PlancError(
            'PLANC_E104',
            `inferred dtype ${out.dtype} but evaluation gives ${folded[k]!.dtype} for '${o}'`,
            where,
          ),
        );
      }
      scope.facts.set(o, withSym(fact));
    });
  }
  checkDeclaredOutputs(graph, scope, diags);
  if (opts.annotate !== false) {
    for (const [name, f] of scope.facts) {
      const v = graph.values.get(name);
      if (v && !graph.initializers.has(name))
        v.type = { dtype: f.dtype, shape: f.shape ?? v.type?.shape, ...(v.type?.sym ? { sym: v.type.sym } : {}) };
    }
  }
  return scope.facts;
}

function isDefinedSomewhere(graph: Graph, name: string, scope: FactScope): boolean {
  return graph.nodes.some((n) => n.outputs.includes(name)) || scope.get(name) !== undefined;
}

function constFact(t: Tensor): InferInput {
  return { dtype: t.dtype, shape: [...t.dims], value: t };
}

/** Small integer constants also carry their elements as Dims. */
function withSym(f: InferInput): InferInput {
  if (f.value && !f.sym && isInt(f.dtype) && f.value.rank <= 1 && f.value.size <= SYM_LIMIT) {
    return { ...f, sym: Array.from(f.value.nums) };
  }
  return f;
}

/** Evaluates a node whose inputs are all small constants. */
function tryFold(
  _model: Model,
  evalFn: (ctx: EvalContext, inputs: (Tensor | undefined)[]) => Tensor[],
  ctx: InferContext,
  inputs: (InferInput | undefined)[],
): Tensor[] | undefined {
  if (ctx.node.op === 'If' || ctx.node.op.startsWith('Random')) return undefined;
  if (inputs.length === 0 && ctx.node.op !== 'Constant') return undefined;
  if (inputs.some((f) => f !== undefined && (!f.value || f.value.size > FOLD_LIMIT))) return undefined;
  try {
    const outs = evalFn(
      { ...ctx, runSubgraph: () => ctx.fail('no subgraphs while folding') },
      inputs.map((f) => f?.value),
    );
    if (ctx.node.op !== 'Constant' && outs.some((t) => t && t.size > FOLD_LIMIT)) return undefined;
    return outs;
  } catch {
    return undefined; // inference already judged the node; a fold that fails just stays unfolded
  }
}

function checkDeclaredOutputs(graph: Graph, scope: FactScope, diags: Diagnostics): void {
  for (const o of graph.outputs) {
    const declared = graph.values.get(o)?.type;
    const got = scope.get(o);
    const where = { graph: graph.name, node: o, stage: 'inference' };
    if (!got) continue;
    if (!declared) continue;
    if (declared.dtype !== got.dtype) {
      diags.add(
        new PlancError(
          'PLANC_E104',
          `graph output '${o}' is declared ${declared.dtype} but computes ${got.dtype}`,
          where,
        ),
      );
    } else if (declared.shape && got.shape && !compatible(declared.shape, got.shape)) {
      diags.add(
        new PlancError(
          'PLANC_E105',
          `graph output '${o}' is declared ${shapeStr(declared.shape)} but computes ${shapeStr(got.shape)}`,
          where,
        ),
      );
    }
  }
}

/** Shapes agree where both dims are numbers; symbols may stand for any value. */
export function compatible(a: readonly Dim[], b: readonly Dim[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((d, i) => isSym(d) || isSym(b[i]!) || dimEq(d, b[i]!));
}

export { dimStr };
