// Lowering: an inferred IR graph → a Program of kernel calls over tensors (arena slots, weights, inputs, aliases).
import { Diagnostics, type OptionNamer, PlancError, type Where } from '../compiler/diagnostics.ts';
import { BYTES, ONNX_CODE, type DType } from '../compiler/dtype.ts';
import { inferGraph, type Facts } from '../model/infer/infer.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { makeOpContext } from '../model/ops/context.ts';
import type { InferInput } from '../model/ops/types.ts';
import { weightId } from '../model/weights.ts';
import { PLAN_DTYPE_BYTES, PLAN_DTYPES } from '../compiler/kernel-enums.ts';
import { call, operandSpec, type KernelCall } from '../compiler/kernel-schema.ts';
import {
  TENSOR_KIND,
  type PlanKernel,
  type PlanProgram,
  type PlanSymbol,
  type PlanTensor,
} from '../compiler/plan/types.ts';
import { dimEval, dimStr, dimSymbols, isSym, isUnknownSymbol, type Dim } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { CPU_RULES, type Lowering, type RuleCtx } from './cpu-rules.ts';
import { ExprTable } from './exprs.ts';
import { boundOption, MAX_PLAN_BYTES } from './profile.ts';

/** The weights all programs of a plan share: each distinct tensor once, by content id. */
export class PlanWeights {
  readonly list: { id: string; tensor: Tensor }[] = [];
  private readonly index = new Map<string, number>();
  constructor(private readonly model: Model) {}

  /** Index of a model weight by its id. */
  byId(id: string): number {
    return this.add(id, this.model.weights.get(id)!.tensor);
  }

  /** Index of a folded constant (hashed like model weights, so equal constants are stored once). */
  byValue(t: Tensor): number {
    return this.add(weightId(t), t);
  }

  private add(id: string, t: Tensor): number {
    const known = this.index.get(id);
    if (known !== undefined) return known;
    this.list.push({ id, tensor: t });
    this.index.set(id, this.list.length - 1);
    return this.list.length - 1;
  }
}

export interface LowerOptions {
  /** Upper bound of every runtime symbol (sizes arena slots). */
  symbolMax: Record<string, number>;
}

/**
 * Lowers one graph. ARENA tensors get slot sizes; offsets are assigned by the memory planner afterwards. A node that
 * cannot be lowered is added to `problems` (when given) and lowering goes on, so one run names every such node; the
 * program is then incomplete and the caller must fail with all of them.
 */
export function lowerGraph(
  model: Model,
  graph: Graph,
  weights: PlanWeights,
  opts: LowerOptions,
  problems?: Diagnostics,
): PlanProgram {
  const diags = new Diagnostics();
  const facts = inferGraph(model, graph, { annotate: true }, diags);
  diags.throwIfAny();
  const own = problems ?? new Diagnostics();
  const p = new Lowerer(model, graph, facts, weights, opts, own).run();
  if (!problems) own.throwIfAny();
  return p;
}

/**
 * Graph inputs a kernel writes in place (the caches of planc.CacheWrite): they become STATE tensors. Such an input
 * must have no other reader, since the write changes it under them.
 */
function statefulInputs(g: Graph): Set<string> {
  const state = new Set(
    g.nodes
      .filter((n) => n.domain === 'planc' && n.op === 'CacheWrite' && g.inputs.includes(n.inputs[0]!))
      .map((n) => n.inputs[0]!),
  );
  for (const n of g.nodes) {
    n.inputs.forEach((x, k) => {
      if (state.has(x) && !(n.op === 'CacheWrite' && k === 0) && n.op !== 'Shape') {
        throw new PlancError(
          'PLANC_E404',
          `cache input '${x}' is written in place by planc.CacheWrite, so it may have no other reader (but Shape)`,
          { graph: g.name, node: n.name, op: n.op, stage: 'lowering' },
        );
      }
    });
  }
  return state;
}

/** How many of each planc op a graph holds (what the fusion passes made). */
function fusedOpCounts(g: Graph): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const n of g.nodes) if (n.domain === 'planc') counts[`planc.${n.op}`] = (counts[`planc.${n.op}`] ?? 0) + 1;
  return counts;
}

class Lowerer {
  private readonly symbols: PlanSymbol[] = [];
  private readonly exprs: ExprTable;
  private readonly tensors: PlanTensor[] = [];
  private readonly kernels: PlanKernel[] = [];
  private readonly byValue = new Map<string, number>();
  private readonly maxBind: Map<string, number>;

  /** Values not computed because their node (or one before it) could not be lowered. */
  private readonly failed = new Set<string>();

  constructor(
    private readonly model: Model,
    private readonly graph: Graph,
    private readonly facts: Facts,
    private readonly weights: PlanWeights,
    opts: LowerOptions,
    private readonly problems: Diagnostics,
  ) {
    // a symbol is bound from the first input dim that is exactly it; symbols no dim gives come from the value of a
    // length input (the past length of an in-place cache)
    for (const fromValue of [false, true]) {
      graph.inputs.forEach((name, i) => {
        const f = facts.get(name);
        (fromValue ? f?.sym : f?.shape)?.forEach((d, axis) => this.bindSymbol(d, i, axis, fromValue));
      });
    }
    this.exprs = new ExprTable(this.symbols);
    this.maxBind = new Map(Object.entries(opts.symbolMax));
  }

  /** Binds d's symbol to (input, axis) when d is a plain symbol not bound yet. */
  private bindSymbol(d: Dim, input: number, axis: number, fromValue: boolean): void {
    if (!isSym(d) || d.terms.size !== 1) return;
    const [key, coeff] = [...d.terms][0]!;
    if (coeff !== 1 || key === '' || key.includes('*') || this.symbols.some((s) => s.name === key)) return;
    this.symbols.push({ name: key, input, axis, fromValue });
  }

  run(): PlanProgram {
    const g = this.graph;
    const state = statefulInputs(g);
    g.inputs.forEach((name, i) =>
      this.byValue.set(
        name,
        this.newTensor(name, state.has(name) ? TENSOR_KIND.STATE : TENSOR_KIND.INPUT, this.fact(name), { ref: i }),
      ),
    );
    for (const node of g.nodes) {
      if (node.inputs.some((x) => this.failed.has(x))) {
        node.outputs.forEach((o) => this.failed.add(o));
        continue;
      }
      try {
        this.lowerNode(node);
      } catch (e) {
        if (!(e instanceof PlancError)) throw e;
        this.problems.add(e);
        node.outputs.forEach((o) => this.failed.add(o));
      }
    }
    if (this.failed.size > 0) return this.program([]);
    const outputs = g.outputs.map((name) => {
      let t = this.tensorOf(name, `graph output '${name}'`);
      if (this.rootKind(t) !== TENSOR_KIND.ARENA) {
        const copy = this.newTensor(name, TENSOR_KIND.ARENA, this.fact(name));
        this.pushKernel(call('copy'), [t], [copy], `output ${name}`, [], this.where(name));
        t = copy;
      }
      return { name, tensor: t };
    });
    return this.program(outputs);
  }

  private program(outputs: PlanProgram['outputs']): PlanProgram {
    const g = this.graph;
    return {
      graph: g.name,
      symbols: this.symbols,
      exprs: this.exprs.exprs,
      tensors: this.tensors,
      kernels: this.kernels,
      inputs: g.inputs.map((name, i) => ({ name, tensor: i })),
      outputs,
      arenaBytes: 0,
      arenaLowerBound: 0,
      tensorBytesSum: 0,
      fusedOps: fusedOpCounts(g),
    };
  }

  private where(node: Node | string) {
    return typeof node === 'string'
      ? { graph: this.graph.name, node, stage: 'lowering' }
      : { graph: this.graph.name, node: node.name, op: node.op, stage: 'lowering' };
  }

  private fact(name: string): InferInput {
    const f = this.facts.get(name);
    if (!f) throw new PlancError('PLANC_E404', `value '${name}' has no inferred type`, this.where(name));
    return f;
  }

  private rootKind(t: number): number {
    let x = this.tensors[t]!;
    while (x.kind === TENSOR_KIND.ALIAS) x = this.tensors[x.ref]!;
    return x.kind;
  }

  /** Creates a tensor for a value with the given dims (default: the value's inferred shape). */
  private newTensor(
    name: string,
    kind: PlanTensor['kind'],
    f: InferInput,
    extra: Partial<PlanTensor> = {},
    dims?: Dim[],
  ): number {
    const shape = dims ?? f.shape;
    if (!shape) throw new PlancError('PLANC_E404', `value '${name}' has unknown rank`, this.where(name));
    const where = this.where(name);
    let slotBytes = 0;
    if (kind === TENSOR_KIND.ARENA) {
      let n = BYTES[f.dtype];
      for (const d of shape) {
        const v = dimEval(d, this.maxBind);
        if (v === undefined) throw this.unboundedDim(d, name, where);
        n *= Math.max(0, v);
      }
      slotBytes = n;
    }
    this.checkAddressable(name, f.dtype, shape, where);
    if (PLAN_DTYPE_BYTES[ONNX_CODE[f.dtype]] === undefined)
      throw new PlancError('PLANC_E404', `${f.dtype} tensor '${name}' is not supported by plans`, where);
    this.tensors.push({
      name,
      kind,
      dtype: ONNX_CODE[f.dtype],
      dims: shape.map((d) => this.exprs.intern(d, where)),
      offset: 0,
      slotBytes,
      ref: 0,
      ...extra,
    });
    return this.tensors.length - 1;
  }

  /**
   * A tensor whose bytes at the profile's bounds exceed what a plan can address (MAX_PLAN_BYTES) is refused naming the
   * dims and the options that bound them (an absurd --max-batch or a model dim of 2^40 would otherwise overflow sizes).
   */
  private checkAddressable(name: string, dtype: DType, shape: Dim[], where: Where): void {
    let n = BYTES[dtype];
    for (const d of shape) {
      const v = dimEval(d, this.maxBind);
      if (v === undefined) return; // unbounded: refused where the size is needed
      n *= Math.max(0, v);
    }
    if (n <= MAX_PLAN_BYTES) return;
    const syms = [...new Set(shape.flatMap((d) => dimSymbols(d)))];
    const dims = shape.map((d) => {
      const v = dimEval(d, this.maxBind);
      return isSym(d) ? `${dimStr(d)} ≤ ${v}` : String(v);
    });
    const fix = (opt: OptionNamer) =>
      syms.length
        ? `lower ${syms.map((s) => `${s} (${boundOption(s)(opt)})`).join(', ')}`
        : 'the model declares these dims';
    throw new PlancError(
      'PLANC_E404',
      (opt) =>
        `tensor '${name}' (${dtype}[${dims.join(', ')}]) would need ${n} bytes at the profile's bounds, more than a plan can address (${MAX_PLAN_BYTES} bytes): ${fix(opt)}`,
      where,
    );
  }

  /**
   * The error for a size with no upper bound: a size computed from tensor values (a fresh symbol of inference) names
   * the node that computes it; a model symbol names the input that carries it, for --max-dim.
   */
  private unboundedDim(d: Dim, value: string, where: Where): PlancError {
    const missing = dimSymbols(d).filter((s) => !this.maxBind.has(s));
    const fresh = missing.find(isUnknownSymbol);
    if (fresh) {
      const node = this.graph.nodes.find((n) =>
        n.outputs.some((o) => o && (this.facts.get(o)?.shape ?? []).some((x) => dimSymbols(x).includes(fresh))),
      );
      return new PlancError(
        'PLANC_E404',
        `the size of '${value}' depends on tensor values computed at run time${node ? ` (node '${node.name}', ${node.op})` : ''}, not on the model's input shapes: plans need sizes bounded by the inputs' dimensions`,
        where,
      );
    }
    const carrier = missing.map((s) => this.inputWith(s)).find((x) => x);
    return new PlancError(
      'PLANC_E404',
      (opt) =>
        `no upper bound for dimension '${dimStr(d)}' of '${value}': ${carrier ? `give '${carrier.symbol}' (axis ${carrier.axis} of input '${carrier.input}') a maximum with ${opt('maxDim')} ${carrier.symbol}=N` : `give its symbols a maximum (${opt('maxDim')} NAME=N)`}`,
      where,
    );
  }

  /** The graph input and axis whose dimension is exactly symbol s. */
  private inputWith(s: string): { input: string; axis: number; symbol: string } | undefined {
    for (const input of this.graph.inputs) {
      const axis = (this.facts.get(input)?.shape ?? []).findIndex((x) => dimSymbols(x).includes(s));
      if (axis >= 0) return { input, axis, symbol: s };
    }
    return undefined;
  }

  /** The tensor holding a value: existing, a weight for constants, or materialized symbolic ints. */
  private tensorOf(name: string, usedBy: string): number {
    const known = this.byValue.get(name);
    if (known !== undefined) return known;
    const f = this.fact(name);
    let t: number;
    if (f.value) {
      t = this.newTensor(name, TENSOR_KIND.WEIGHT, f, { ref: this.weights.byValue(f.value) }, [...f.value.dims]);
    } else if (f.sym) {
      t = this.newTensor(name, TENSOR_KIND.ARENA, f);
      this.pushKernel(call('values', { values: f.sym }), [], [t], name, [], this.where(name));
    } else {
      throw new PlancError('PLANC_E404', `value '${name}' used by ${usedBy} is never computed`, this.where(name));
    }
    this.byValue.set(name, t);
    return t;
  }

  private lowerNode(node: Node): void {
    const outs = node.outputs.filter((o) => o);
    if (
      outs.every((o) => {
        const f = this.facts.get(o);
        return f?.value !== undefined || f?.sym !== undefined;
      })
    )
      return; // host-side constant or shape math
    const opset = this.model.opsets[node.domain] ?? 1;
    const rule = CPU_RULES[node.domain ? `${node.domain}.${node.op}` : node.op];
    const where = this.where(node);
    if (!rule)
      throw new PlancError(
        'PLANC_E404',
        `${node.domain ? node.domain + '.' : ''}${node.op} has no CPU kernel yet`,
        where,
      );
    const inputs = node.inputs.map((x) => (x ? this.fact(x) : undefined));
    const ctx: RuleCtx = {
      ...makeOpContext(node, opset, 'PLANC_E404', this.graph.name),
      inputs,
      outputs: node.outputs.map((o) => (o ? this.fact(o) : undefined)),
      shape: (i) => {
        const s = inputs[i]?.shape;
        if (!s) throw new PlancError('PLANC_E404', `input ${i} has unknown shape`, where);
        return s;
      },
      known: (i) => {
        const f = inputs[i];
        if (!f) throw new PlancError('PLANC_E404', `input ${i} is required`, where);
        if (f.sym) return f.sym;
        if (f.value) return Array.from(f.value.nums);
        throw new PlancError(
          'PLANC_E404',
          `input ${i} ('${node.inputs[i]}') must be known before running (a constant or computed from shapes)`,
          where,
        );
      },
    };
    const low: Lowering = rule(ctx);
    if ('alias' in low) {
      const src = this.tensorOf(node.inputs[low.alias]!, node.name);
      const out = node.outputs[0]!;
      this.byValue.set(out, this.newTensor(out, TENSOR_KIND.ALIAS, this.fact(out), { ref: src }));
      return;
    }
    const ins = (low.inputs ?? node.inputs.map((x, i) => (x ? i : -1))).map((i) => {
      if (i instanceof Tensor)
        return this.newTensor(
          `${node.name}:const`,
          TENSOR_KIND.WEIGHT,
          { dtype: i.dtype, shape: [...i.dims] },
          { ref: this.weights.byValue(i) },
        );
      if (i === -1 || !node.inputs[i]) return -1;
      const t = this.tensorOf(node.inputs[i]!, node.name);
      const view = low.inViews?.[i];
      return view
        ? this.newTensor(`${node.inputs[i]}:view`, TENSOR_KIND.ALIAS, this.fact(node.inputs[i]!), { ref: t }, view)
        : t;
    });
    const kernelOuts: number[] = [];
    if (low.inPlace !== undefined) {
      // output 0 is input `inPlace`'s buffer, written by the kernel (a STATE input: the caller's cache)
      const src = ins[low.inPlace]!;
      if (src < 0 || this.rootKind(src) !== TENSOR_KIND.STATE)
        throw new PlancError('PLANC_E404', 'an in-place write needs a cache graph input', where);
      const o = node.outputs[0]!;
      const t = this.newTensor(o, TENSOR_KIND.ALIAS, this.fact(o), { ref: src });
      kernelOuts.push(t);
      this.byValue.set(o, t);
    } else {
      node.outputs.forEach((o, k) => {
        if (!o) {
          if (low.requireOutputs && k < low.requireOutputs)
            throw new PlancError('PLANC_E404', `output ${k} must be present`, where);
          return;
        }
        if (low.maxOutputs !== undefined && k >= low.maxOutputs)
          throw new PlancError('PLANC_E404', `optional output ${k} ('${o}') is not supported by the CPU kernel`, where);
        const f = this.fact(o);
        const dims = low.outDims?.[k];
        const t = this.newTensor(o, TENSOR_KIND.ARENA, f, {}, dims);
        kernelOuts.push(t);
        this.byValue.set(o, dims ? this.newTensor(o, TENSOR_KIND.ALIAS, f, { ref: t }) : t);
      });
    }
    this.pushKernel(low, ins, kernelOuts, node.name, node.origin, where);
  }

  /** Appends a kernel call, its operands' dtypes checked against the kernel's schema (compiler/kernel-schema.ts). */
  private pushKernel(
    c: KernelCall,
    inputs: number[],
    outputs: number[],
    node: string,
    origin: string[],
    where: Where,
  ): void {
    for (const [io, list] of [
      ['inputs', inputs],
      ['outputs', outputs],
    ] as const) {
      list.forEach((t, i) => {
        if (t < 0) return;
        const spec = operandSpec(c.kernel, io, i);
        const dtype = PLAN_DTYPES.find((d) => d.code === this.tensors[t]!.dtype)?.name;
        if (!spec || !dtype || !spec.dtypes.includes(dtype)) {
          throw new PlancError(
            'PLANC_E404',
            `kernel '${c.kernel}' ${io === 'inputs' ? 'input' : 'output'} ${i}${spec ? ` (${spec.name})` : ''} is ${dtype ?? `dtype code ${this.tensors[t]!.dtype}`}; it takes ${spec ? spec.dtypes.join('/') : `${i} ${io} at most`}`,
            where,
          );
        }
      });
    }
    this.kernels.push({
      name: c.kernel,
      inputs,
      outputs,
      iargs: c.iargs.map((d) => this.exprs.intern(d, where)),
      fargs: c.fargs,
      node,
      origin,
    });
  }
}
