// A program of explicit kernel calls on hand-made operands (weights in a plan blob, feeds, arena outputs), encoded by
// runtime/encode-program.ts and loaded by the native runtime: single kernels tested or timed without an IR graph.
import { DTYPE_CODE, type PlanDTypeName } from '../../compiler/kernel-enums.ts';
import type { KernelCall } from '../../compiler/kernel-schema.ts';
import type { PlanExpr, PlanKernel, PlanProgram, PlanTensor } from '../../compiler/plan/types.ts';
import { encodeProgram } from '../../runtime/encode-program.ts';
import {
  kernelIds,
  planFree,
  planNew,
  programFree,
  programNew,
  programRun,
  type NativeArray,
  type NativePlan,
  type NativeProgram,
} from '../../runtime/native.ts';

/** The dtypes of the operands these programs use (codes: compiler/kernel-enums.ts DTYPE_CODE). */
export type OperandDType = Extract<PlanDTypeName, 'float32' | 'uint8' | 'int8' | 'int16' | 'int32' | 'int64'>;
export type Typed = Float32Array | Int8Array | Int16Array | Int32Array | Uint8Array | BigInt64Array;

/** An operand: a weight (stored in the blob; the same object twice is one weight), a feed, or an arena output. */
export interface Operand {
  role: 'weight' | 'feed' | 'out';
  dtype: OperandDType;
  dims: number[];
  data: Typed;
}

/** One call: the kernel with its arguments by name (compiler/kernel-schema.ts `call`), its variant name, inputs (null: omitted optional) and outputs. */
export interface Call {
  call: KernelCall;
  variant: string;
  ins: (Operand | null)[];
  outs: Operand[];
}

export interface CallProgram {
  /** Runs every call once (in order); returns the buffers of the program's outputs (the outputs of the last call). */
  run(): Typed[];
  free(): void;
}

/**
 * Builds and loads a program of `calls`; the program's feeds are the feed operands in first-use order, its outputs the
 * last call's outputs. Outputs share one arena region (each call's slot starts at offset 0). Throws the loader's error
 * (e.g. a variant this machine cannot run: "kernel K variant V cannot run on this machine: why"; nativeInfo().variants
 * lists the ones it runs).
 */
export function callProgram(calls: Call[]): CallProgram {
  const exprs: PlanExpr[] = [];
  const konst = new Map<number, number>();
  const expr = (v: number) => {
    if (!konst.has(v)) {
      konst.set(v, exprs.length);
      exprs.push({ terms: [{ coeff: v, factors: [] }] });
    }
    return konst.get(v)!;
  };
  const tensors: PlanTensor[] = [];
  const weights: Typed[] = [];
  const feeds: Typed[] = [];
  const seen = new Map<Operand, number>();
  let arena = 64;
  const tensorOf = (o: Operand): number => {
    if (o.role !== 'out' && seen.has(o)) return seen.get(o)!;
    const t: PlanTensor = {
      name: `t${tensors.length}`,
      kind: 0,
      dtype: DTYPE_CODE[o.dtype]!,
      dims: o.dims.map(expr),
      offset: 0,
      slotBytes: 0,
      ref: 0,
    };
    if (o.role === 'weight') {
      t.kind = 1;
      t.ref = weights.length;
      weights.push(o.data);
    } else if (o.role === 'feed') {
      t.kind = 2;
      t.ref = feeds.length;
      feeds.push(o.data);
    }
    tensors.push(t);
    seen.set(o, tensors.length - 1);
    return tensors.length - 1;
  };
  const kernels: PlanKernel[] = calls.map((c) => {
    const inputs = c.ins.map((o) => (o ? tensorOf(o) : -1));
    let offset = 0;
    const outputs = c.outs.map((o) => {
      const i = tensorOf(o);
      const slot = Math.max(64, Math.ceil(o.data.byteLength / 64) * 64);
      tensors[i]!.offset = offset;
      tensors[i]!.slotBytes = slot;
      offset += slot;
      return i;
    });
    arena = Math.max(arena, offset);
    const iargs = c.call.iargs.map((v) => {
      if (typeof v !== 'number') throw new Error(`internal: ${c.call.kernel}: call programs take constant iargs`);
      return expr(v);
    });
    return {
      name: c.call.kernel,
      inputs,
      outputs,
      iargs,
      fargs: c.call.fargs,
      node: c.call.kernel,
      origin: [],
      variant: c.variant,
    };
  });
  const last = kernels[kernels.length - 1]!;
  const program: PlanProgram = {
    graph: 'calls',
    symbols: [],
    exprs,
    tensors,
    kernels,
    inputs: feeds.map((_, i) => ({ name: `in${i}`, tensor: tensors.findIndex((t) => t.kind === 2 && t.ref === i) })),
    outputs: last.outputs.map((t, i) => ({ name: `out${i}`, tensor: t })),
    arenaBytes: arena,
    arenaLowerBound: arena,
    tensorBytesSum: arena,
    fusedOps: {},
  };
  let size = 0;
  const ranges: bigint[] = [];
  for (const w of weights) {
    ranges.push(BigInt(size), BigInt(w.byteLength));
    size += Math.ceil(w.byteLength / 64) * 64;
  }
  const blob = new Uint8Array(size);
  weights.forEach((w, i) => blob.set(new Uint8Array(w.buffer, w.byteOffset, w.byteLength), Number(ranges[2 * i])));
  const plan: NativePlan = planNew(blob, BigInt64Array.from(ranges), arena);
  let prog: NativeProgram;
  try {
    prog = programNew(plan, encodeProgram(program, weights.length, kernelIds()));
  } catch (e) {
    planFree(plan);
    throw e;
  }
  const lastOuts = calls[calls.length - 1]!.outs;
  const results = lastOuts.map((o) => new (o.data.constructor as new (n: number) => Typed)(o.data.length));
  const symbols = new BigInt64Array(0);
  return {
    run() {
      programRun(prog, symbols, feeds as NativeArray[], results as NativeArray[]);
      return results;
    },
    free() {
      programFree(prog);
      planFree(plan);
    },
  };
}
