// Looping control flow: Loop (trip count, condition, loop-carried values, scan outputs) and Scan (opset 8 batched form, 9+ axes/directions).
import { allocData, type Data, type DType } from '../../compiler/dtype.ts';
import type { Graph, ValueType } from '../../compiler/ir.ts';
import { dimEq, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import type { EvalContext, InferContext, InferOutput, OpContext, OpHandler } from './types.ts';

// ---- tensor helpers: take one index along an axis, stack along a new axis ----

function outerInner(dims: readonly number[], axis: number): [number, number] {
  let outer = 1;
  for (let i = 0; i < axis; i++) outer *= dims[i]!;
  let inner = 1;
  for (let i = axis + 1; i < dims.length; i++) inner *= dims[i]!;
  return [outer, inner];
}

/** The sub-tensor at `index` along `axis` (that axis removed). */
function takeAt(t: Tensor, axis: number, index: number): Tensor {
  const [outer, inner] = outerInner(t.dims, axis);
  const len = t.dims[axis]!;
  const dims = t.dims.filter((_, i) => i !== axis);
  const out = allocData(t.dtype, outer * inner);
  const src = t.data;
  for (let o = 0; o < outer; o++) {
    const s = (o * len + index) * inner;
    for (let q = 0; q < inner; q++) out[o * inner + q] = src[s + q]!;
  }
  return new Tensor(t.dtype, dims, out);
}

/** Stacks equally shaped tensors along a new axis `axis` (of the result's rank); `items[k]` lands at position k. */
function stackAt(ctx: OpContext, items: Tensor[], axis: number, dtype: DType, emptyDims: readonly number[]): Tensor {
  if (items.length === 0) return Tensor.zeros(dtype, [...emptyDims.slice(0, axis), 0, ...emptyDims.slice(axis)]);
  const first = items[0]!;
  for (const t of items) {
    if (t.dtype !== first.dtype || t.dims.length !== first.dims.length || t.dims.some((d, i) => d !== first.dims[i])) {
      ctx.fail(`scan output changes shape across iterations: [${first.dims}] vs [${t.dims}]`);
    }
  }
  const n = items.length;
  const dims = [...first.dims.slice(0, axis), n, ...first.dims.slice(axis)];
  let outer = 1;
  for (let i = 0; i < axis; i++) outer *= first.dims[i]!;
  const inner = first.size / Math.max(1, outer) || 0;
  const out: Data = allocData(first.dtype, first.size * n);
  items.forEach((t, k) => {
    const src = t.data;
    for (let o = 0; o < outer; o++) {
      const d = (o * n + k) * inner;
      for (let q = 0; q < inner; q++) out[d + q] = src[o * inner + q]!;
    }
  });
  return new Tensor(first.dtype, dims, out);
}

/** Concrete dims of a body output as annotated by inference (for empty scan outputs), else []. */
function declaredDims(g: Graph, name: string): number[] {
  const s = g.values.get(name)?.type?.shape;
  return s?.every((d) => typeof d === 'number') ? (s as number[]) : [];
}

function declaredDtype(g: Graph, name: string, fallback: DType): DType {
  return g.values.get(name)?.type?.dtype ?? fallback;
}

/** A type both agree on: equal dims kept, differing dims unknown, differing ranks unknown. */
function mergeTypes(a: ValueType, b: ValueType): ValueType {
  if (!a.shape || !b.shape || a.shape.length !== b.shape.length) return { dtype: a.dtype };
  return { dtype: a.dtype, shape: a.shape.map((d, k) => (dimEq(d, b.shape![k]!) ? d : unknownDim())) };
}

function sameType(a: ValueType, b: ValueType): boolean {
  if (a.dtype !== b.dtype) return false;
  if (!a.shape || !b.shape) return a.shape === b.shape;
  return a.shape.length === b.shape.length && a.shape.every((d, i) => dimEq(d, b.shape![i]!));
}

/**
 * Infers a body whose first `nState` inputs are carried from its outputs at `outOffset`: when an iteration changes
 * a carried type, the body is inferred again with the merged types. Returns the final body output types.
 */
function inferCarried(
  ctx: InferContext,
  body: Graph,
  fixed: ValueType[],
  carried: ValueType[],
  rest: ValueType[],
  outOffset: number,
): ValueType[] {
  let state = carried;
  for (let pass = 0; pass < 3; pass++) {
    const outs = ctx.inferSubgraph(body, [...fixed, ...state, ...rest]);
    if (outs.length < outOffset + state.length)
      ctx.fail(`body has ${outs.length} outputs, expected at least ${outOffset + state.length}`);
    const next = state.map((s, i) => {
      const o = outs[outOffset + i]!;
      if (o.dtype !== s.dtype) ctx.fail(`loop-carried value ${i} is ${s.dtype} but the body returns ${o.dtype}`);
      return mergeTypes(s, o);
    });
    if (next.every((t, i) => sameType(t, state[i]!))) return outs;
    state = next;
  }
  return ctx.inferSubgraph(body, [...fixed, ...state, ...rest]);
}

// ---- Loop ----

const LOOP: OpHandler = {
  op: 'Loop',
  since: 1,
  infer(ctx, inputs) {
    const body = ctx.graph('body');
    const m = inputs[0];
    const cond = inputs[1];
    if (m && m.dtype !== 'int64') ctx.fail(`trip count M must be int64, got ${m.dtype}`);
    if (cond && cond.dtype !== 'bool') ctx.fail(`cond must be bool, got ${cond.dtype}`);
    const carried: ValueType[] = inputs.slice(2).map((x, i) => {
      const v = x ?? ctx.fail(`loop-carried input ${i} is missing`);
      return { dtype: v.dtype, shape: v.shape };
    });
    if (body.inputs.length !== carried.length + 2)
      ctx.fail(`body takes ${body.inputs.length} inputs, expected ${carried.length + 2}`);
    const fixed: ValueType[] = [
      { dtype: 'int64', shape: [] },
      { dtype: 'bool', shape: [] },
    ];
    const outs = inferCarried(ctx, body, fixed, carried, [], 1);
    if (outs[0]!.dtype !== 'bool') ctx.fail(`body condition output must be bool, got ${outs[0]!.dtype}`);
    const nScan = outs.length - 1 - carried.length;
    if (ctx.node.outputs.length > carried.length + nScan)
      ctx.fail(`node has ${ctx.node.outputs.length} outputs, body gives ${carried.length + nScan}`);
    const trips: Dim = unknownDim();
    const result: InferOutput[] = outs.slice(1, 1 + carried.length).map((o, i) => mergeTypes(carried[i]!, o));
    for (const o of outs.slice(1 + carried.length))
      result.push({ dtype: o.dtype, shape: o.shape ? [trips, ...o.shape] : undefined });
    return result.slice(0, ctx.node.outputs.length);
  },
  eval(ctx, inputs) {
    return runLoop(ctx, inputs);
  },
};

function runLoop(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const body = ctx.graph('body');
  const m = inputs[0];
  const condIn = inputs[1];
  if (m && m.size !== 1) ctx.fail(`trip count M must have one element, got dims [${m.dims}]`);
  if (condIn && condIn.size !== 1) ctx.fail(`cond must have one element, got dims [${condIn.dims}]`);
  const maxTrips = m ? m.nums[0]! : Infinity;
  let cond = condIn ? condIn.nums[0]! !== 0 : true;
  let state = inputs.slice(2).map((x, i) => x ?? ctx.fail(`loop-carried input ${i} is missing`));
  const nState = state.length;
  const nScan = body.outputs.length - 1 - nState;
  if (nScan < 0) ctx.fail(`body has ${body.outputs.length} outputs, expected at least ${nState + 1}`);
  const scans: Tensor[][] = Array.from({ length: nScan }, () => []);
  let it = 0;
  while (cond && it < maxTrips) {
    const outs = ctx.runSubgraph(body, [Tensor.scalar('int64', it), Tensor.scalar('bool', 1), ...state]);
    const c = outs[0]!;
    if (c.size !== 1) ctx.fail(`body condition must have one element, got dims [${c.dims}]`);
    cond = c.nums[0]! !== 0;
    state = outs.slice(1, 1 + nState);
    outs.slice(1 + nState).forEach((t, k) => scans[k]!.push(t));
    it++;
  }
  const result = [...state];
  scans.forEach((list, k) => {
    const name = body.outputs[1 + nState + k]!;
    result.push(stackAt(ctx, list, 0, declaredDtype(body, name, 'float32'), declaredDims(body, name)));
  });
  return result;
}

// ---- Scan ----

interface ScanAttrs {
  nScan: number;
  inAxes: number[];
  inDirs: number[];
  outAxes: number[];
  outDirs: number[];
}

/** Scan-9+ attributes, axes normalized against the given input ranks and body output ranks. */
function scanAttrs(
  ctx: OpContext,
  nInputs: number,
  inRanks: (number | undefined)[],
  nOutputs: number,
  outRanks: (number | undefined)[],
): ScanAttrs {
  const nScan = ctx.int('num_scan_inputs');
  const nState = nInputs - nScan;
  if (nScan < 1 || nState < 0) ctx.fail(`num_scan_inputs ${nScan} does not fit ${nInputs} inputs`);
  const nScanOut = nOutputs - nState;
  const norm = (axes: number[], ranks: (number | undefined)[], what: string): number[] =>
    axes.map((a, i) => {
      const r = ranks[i];
      if (r === undefined) return a;
      const n = a < 0 ? a + r : a;
      if (n < 0 || n >= r) ctx.fail(`${what} ${a} is out of range for rank ${r}`);
      return n;
    });
  const list = (name: string, n: number): number[] => {
    const v = ctx.ints(name, new Array<number>(n).fill(0));
    if (v.length !== n) ctx.fail(`${name} has ${v.length} entries, expected ${n}`);
    return v;
  };
  const inAxes = norm(list('scan_input_axes', nScan), inRanks.slice(nState), 'scan_input_axes');
  const outAxes = norm(
    list('scan_output_axes', nScanOut),
    outRanks.slice(nState).map((r) => (r === undefined ? undefined : r + 1)),
    'scan_output_axes',
  );
  return {
    nScan,
    inAxes,
    inDirs: list('scan_input_directions', nScan),
    outAxes,
    outDirs: list('scan_output_directions', Math.max(0, nScanOut)),
  };
}

const SCAN_9: OpHandler = {
  op: 'Scan',
  since: 9,
  infer(ctx, inputs) {
    const body = ctx.graph('body');
    const ins = inputs.map((x, i) => x ?? ctx.fail(`input ${i} is required`));
    const nScan = ctx.int('num_scan_inputs');
    const nState = ins.length - nScan;
    const outRanks = body.outputs.map((o) => body.values.get(o)?.type?.shape?.length);
    const a = scanAttrs(
      ctx,
      ins.length,
      ins.map((x) => x.shape?.length),
      body.outputs.length,
      outRanks,
    );
    const states: ValueType[] = ins.slice(0, nState).map((x) => ({ dtype: x.dtype, shape: x.shape }));
    let seq: Dim | undefined;
    const slices: ValueType[] = ins.slice(nState).map((x, i) => {
      if (!x.shape) return { dtype: x.dtype };
      const ax = a.inAxes[i]!;
      if (seq === undefined) seq = x.shape[ax];
      return { dtype: x.dtype, shape: x.shape.filter((_, k) => k !== ax) };
    });
    const outs = inferCarried(ctx, body, [], states, slices, 0);
    const seqLen = seq ?? unknownDim();
    const result: InferOutput[] = outs.slice(0, nState).map((o, i) => mergeTypes(states[i]!, o));
    outs.slice(nState).forEach((o, j) => {
      if (!o.shape) {
        result.push({ dtype: o.dtype });
        return;
      }
      let ax = ctx.ints('scan_output_axes', [])[j] ?? 0;
      if (ax < 0) ax += o.shape.length + 1;
      if (ax < 0 || ax > o.shape.length)
        ctx.fail(`scan_output_axes ${ax} is out of range for rank ${o.shape.length + 1}`);
      result.push({ dtype: o.dtype, shape: [...o.shape.slice(0, ax), seqLen, ...o.shape.slice(ax)] });
    });
    return result.slice(0, ctx.node.outputs.length);
  },
  eval(ctx, inputs) {
    const body = ctx.graph('body');
    const ins = inputs.map((x, i) => x ?? ctx.fail(`input ${i} is required`));
    const nScan = ctx.int('num_scan_inputs');
    const nState = ins.length - nScan;
    const scanIns = ins.slice(nState);
    const inAttrs = scanAttrs(
      ctx,
      ins.length,
      ins.map((x) => x.rank),
      body.outputs.length,
      [],
    );
    const lens = scanIns.map((x, i) => x.dims[inAttrs.inAxes[i]!]!);
    if (lens.some((l) => l !== lens[0])) ctx.fail(`scan inputs disagree on the sequence length: ${lens.join(', ')}`);
    const { states, scans } = scanLoop(
      ctx,
      body,
      ins.slice(0, nState),
      scanIns,
      inAttrs.inAxes,
      inAttrs.inDirs,
      lens[0]!,
    );
    const outRanks = scans.map((list, j) => list[0]?.rank ?? declaredDims(body, body.outputs[nState + j]!).length);
    const a = scanAttrs(
      ctx,
      ins.length,
      ins.map((x) => x.rank),
      body.outputs.length,
      [...states.map((s) => s.rank), ...outRanks],
    );
    const result = [...states];
    scans.forEach((list, j) => {
      const ordered = a.outDirs[j] ? [...list].reverse() : list;
      const name = body.outputs[nState + j]!;
      result.push(stackAt(ctx, ordered, a.outAxes[j]!, declaredDtype(body, name, 'float32'), declaredDims(body, name)));
    });
    return result;
  },
};

/** Runs the body over `len` steps; returns the final states and each scan output's per-step tensors in step order. */
function scanLoop(
  ctx: EvalContext,
  body: Graph,
  init: Tensor[],
  scanIns: Tensor[],
  axes: number[],
  dirs: number[],
  len: number,
): { states: Tensor[]; scans: Tensor[][] } {
  let states = init;
  const nScanOut = body.outputs.length - init.length;
  const scans: Tensor[][] = Array.from({ length: nScanOut }, () => []);
  for (let t = 0; t < len; t++) {
    const slices = scanIns.map((x, i) => takeAt(x, axes[i]!, dirs[i] ? len - 1 - t : t));
    const outs = ctx.runSubgraph(body, [...states, ...slices]);
    states = outs.slice(0, init.length);
    outs.slice(init.length).forEach((o, j) => scans[j]!.push(o));
  }
  return { states, scans };
}

/** Scan-8: inputs [sequence_lens?, states..., scans...] with a leading batch axis; scanning runs along axis 1. */
const SCAN_8: OpHandler = {
  op: 'Scan',
  since: 8,
  until: 9,
  infer(ctx, inputs) {
    const body = ctx.graph('body');
    const nScan = ctx.int('num_scan_inputs');
    if (inputs[0] && inputs[0].dtype !== 'int64') ctx.fail(`sequence_lens must be int64, got ${inputs[0].dtype}`);
    const ins = inputs.slice(1).map((x, i) => x ?? ctx.fail(`input ${i + 1} is required`));
    const nState = ins.length - nScan;
    if (nState < 0 || nScan < 1) ctx.fail(`num_scan_inputs ${nScan} does not fit ${ins.length} inputs`);
    const batch: Dim = ins[0]?.shape?.[0] ?? unknownDim();
    let seq: Dim | undefined;
    const states: ValueType[] = ins.slice(0, nState).map((x) => ({ dtype: x.dtype, shape: x.shape?.slice(1) }));
    const slices: ValueType[] = ins.slice(nState).map((x) => {
      if (x.shape && seq === undefined) seq = x.shape[1];
      return { dtype: x.dtype, shape: x.shape?.slice(2) };
    });
    const outs = inferCarried(ctx, body, [], states, slices, 0);
    const seqLen = seq ?? unknownDim();
    const result: InferOutput[] = outs.slice(0, nState).map((o, i) => {
      const t = mergeTypes(states[i]!, o);
      return { dtype: t.dtype, shape: t.shape ? [batch, ...t.shape] : undefined };
    });
    for (const o of outs.slice(nState))
      result.push({ dtype: o.dtype, shape: o.shape ? [batch, seqLen, ...o.shape] : undefined });
    return result.slice(0, ctx.node.outputs.length);
  },
  eval(ctx, inputs) {
    const body = ctx.graph('body');
    const nScan = ctx.int('num_scan_inputs');
    const seqLens = inputs[0];
    const ins = inputs.slice(1).map((x, i) => x ?? ctx.fail(`input ${i + 1} is required`));
    const nState = ins.length - nScan;
    const dirs = ctx.ints('directions', new Array<number>(nScan).fill(0));
    if (dirs.length !== nScan) ctx.fail(`directions has ${dirs.length} entries, expected ${nScan}`);
    const batch = ins[0]!.dims[0]!;
    if (ins.some((x) => x.rank < 1 || x.dims[0] !== batch)) ctx.fail('every input must have the same batch size');
    const maxLen = ins[nState]!.dims[1]!;
    if (ins.slice(nState).some((x) => x.rank < 2 || x.dims[1] !== maxLen))
      ctx.fail('scan inputs disagree on the sequence length');
    const finals: Tensor[][] = [];
    const scanOuts: Tensor[][] = [];
    for (let b = 0; b < batch; b++) {
      const len = seqLens ? seqLens.nums[b]! : maxLen;
      if (len < 0 || len > maxLen) ctx.fail(`sequence length ${len} is out of range [0, ${maxLen}]`);
      const st = ins.slice(0, nState).map((x) => takeAt(x, 0, b));
      const sc = ins.slice(nState).map((x) => takeAt(x, 0, b));
      const { states, scans } = scanLoop(
        ctx,
        body,
        st,
        sc,
        sc.map(() => 0),
        dirs,
        len,
      );
      finals.push(states);
      scanOuts.push(scans.map((list, j) => padSteps(ctx, list, maxLen, body, body.outputs[nState + j]!)));
    }
    const result: Tensor[] = [];
    for (let i = 0; i < nState; i++)
      result.push(
        stackAt(
          ctx,
          finals.map((f) => f[i]!),
          0,
          ins[i]!.dtype,
          ins[i]!.dims.slice(1),
        ),
      );
    const nScanOut = body.outputs.length - nState;
    for (let j = 0; j < nScanOut; j++) {
      const name = body.outputs[nState + j]!;
      result.push(
        stackAt(
          ctx,
          scanOuts.map((s) => s[j]!),
          0,
          declaredDtype(body, name, 'float32'),
          [maxLen, ...declaredDims(body, name)],
        ),
      );
    }
    return result;
  },
};

/** Stacks one batch item's scan steps along axis 0, zero-padded to maxLen steps. */
function padSteps(ctx: OpContext, list: Tensor[], maxLen: number, body: Graph, name: string): Tensor {
  const like = list[0];
  const dtype = like?.dtype ?? declaredDtype(body, name, 'float32');
  const dims = like ? like.dims : declaredDims(body, name);
  const padded = [...list];
  while (padded.length < maxLen) padded.push(Tensor.zeros(dtype, dims));
  return stackAt(ctx, padded, 0, dtype, dims);
}

export const LOOP_OPS: OpHandler[] = [LOOP, SCAN_8, SCAN_9];
