// Movement operators that cut, join and repeat tensors: Concat, Split, Slice, Pad, Tile, Expand.
import { allocData } from '../../compiler/dtype.ts';
import { dimAdd, dimDiv, dimMul, dimSub, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { broadcastDims, broadcastIndex, sizeOf, stridesOf, Tensor } from '../../compiler/tensor.ts';
import type { InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { broadcastShapes, need } from './util.ts';
import {
  axesOf,
  ceilDivDim,
  copyRun,
  needIndexType,
  needInt64,
  numsOf,
  sliceLen,
  stridedMap,
  symOf,
  takeByMaps,
  takeElems,
  unifyDim,
} from './movement-common.ts';

function unknownDims(n: number): Dim[] {
  return Array.from({ length: n }, () => unknownDim() as Dim);
}

// ---------- Concat ----------

function concatAxis(ctx: OpContext, rank: number): number {
  const a0 = ctx.opset < 4 ? ctx.int('axis', 1) : ctx.int('axis');
  const a = a0 < 0 ? a0 + rank : a0;
  if (a < 0 || a >= rank) ctx.fail(`axis ${a0} is out of range for rank ${rank}`);
  return a;
}

const Concat: OpHandler = {
  op: 'Concat',
  infer(ctx, inputs) {
    if (inputs.length === 0) ctx.fail('needs at least one input');
    const xs = inputs.map((_, i) => need(ctx, inputs, i));
    const dtype = xs[0]!.dtype;
    for (const x of xs) if (x.dtype !== dtype) ctx.fail(`inputs mix ${dtype} and ${x.dtype}`);
    const known = xs.filter((x) => x.shape !== undefined);
    if (known.length === 0) return [{ dtype, shape: undefined }];
    const rank = known[0]!.shape!.length;
    for (const x of known) if (x.shape!.length !== rank) ctx.fail(`inputs have ranks ${rank} and ${x.shape!.length}`);
    const axis = concatAxis(ctx, rank);
    if (known.length < xs.length) {
      const shape = [...known[0]!.shape!];
      shape[axis] = unknownDim();
      return [{ dtype, shape }];
    }
    const shape = [...xs[0]!.shape!];
    let total: Dim = 0;
    for (const x of xs) {
      for (let i = 0; i < rank; i++)
        if (i !== axis) shape[i] = unifyDim(ctx, shape[i]!, x.shape![i]!, `dim ${i} differs`);
      total = dimAdd(total, x.shape![axis]!);
    }
    shape[axis] = total;
    const out: InferOutput = { dtype, shape };
    if (rank <= 1) {
      const syms = xs.map(symOf);
      if (syms.every((s) => s !== undefined)) out.sym = syms.flat() as Dim[];
    }
    return [out];
  },
  eval(ctx, inputs) {
    const xs = inputs.map((_, i) => need(ctx, inputs, i));
    const first = xs[0]!;
    const rank = first.rank;
    const axis = concatAxis(ctx, rank);
    const dims = [...first.dims];
    let total = 0;
    for (const x of xs) {
      if (x.dtype !== first.dtype) ctx.fail(`inputs mix ${first.dtype} and ${x.dtype}`);
      if (x.rank !== rank) ctx.fail(`inputs have ranks ${rank} and ${x.rank}`);
      for (let i = 0; i < rank; i++)
        if (i !== axis && x.dims[i] !== dims[i]) ctx.fail(`dim ${i} differs: ${dims[i]} vs ${x.dims[i]}`);
      total += x.dims[axis]!;
    }
    dims[axis] = total;
    const outer = sizeOf(dims.slice(0, axis));
    const out = allocData(first.dtype, sizeOf(dims));
    const chunks = xs.map((x) => sizeOf(x.dims.slice(axis)));
    let k = 0;
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < xs.length; j++) {
        const c = chunks[j]!;
        copyRun(out, k, xs[j]!.data, o * c, c);
        k += c;
      }
    }
    return [new Tensor(first.dtype, dims, out)];
  },
};

// ---------- Split ----------

/** Sizes of the parts: from `split`, or num_outputs (ceil, last smaller, opset 18), or equal parts. */
function splitSizes(
  ctx: OpContext,
  dim: Dim,
  nOut: number,
  split: readonly number[] | undefined,
  uneven: boolean,
): Dim[] {
  if (split !== undefined) {
    if (split.length !== nOut) ctx.fail(`split has ${split.length} entries for ${nOut} outputs`);
    if (split.some((s) => s < 0)) ctx.fail(`split [${split}] has a negative size`);
    const sum = split.reduce((a, b) => a + b, 0);
    if (typeof dim === 'number' && sum !== dim) ctx.fail(`split [${split}] sums to ${sum}, the axis has ${dim}`);
    return [...split];
  }
  if (typeof dim !== 'number') {
    if (!uneven) return Array.from({ length: nOut }, () => dimDiv(dim, nOut));
    const chunk = ceilDivDim(dim, nOut);
    return [...Array.from({ length: nOut - 1 }, () => chunk), dimSub(dim, dimMul(chunk, nOut - 1))];
  }
  if (uneven) {
    const chunk = Math.ceil(dim / nOut);
    const last = dim - chunk * (nOut - 1);
    if (last < 0) ctx.fail(`cannot split ${dim} into ${nOut} parts of ${chunk}`);
    return [...Array.from({ length: nOut - 1 }, () => chunk), last];
  }
  if (dim % nOut !== 0) ctx.fail(`cannot split ${dim} into ${nOut} equal parts`);
  return Array.from({ length: nOut }, () => dim / nOut);
}

/** The split sizes given by the node (attribute or input), or undefined when equal parts are asked for. */
interface SplitSpec {
  split?: number[];
  /** True when split comes from an input whose value is not known (inference only). */
  unknown?: boolean;
  uneven: boolean;
}

function splitSpec(ctx: OpContext, splitInput: InferInput | Tensor | undefined): SplitSpec {
  const nOut = ctx.node.outputs.length;
  let uneven = false;
  if (ctx.opset >= 18 && ctx.has('num_outputs')) {
    const n = ctx.int('num_outputs');
    if (n !== nOut) ctx.fail(`num_outputs ${n} differs from the ${nOut} outputs`);
    if (splitInput !== undefined) ctx.fail('split input and num_outputs are both given');
    uneven = true;
  }
  if (splitInput instanceof Tensor) return { split: Array.from(splitInput.nums), uneven };
  if (splitInput !== undefined) {
    needInt64(ctx, splitInput.dtype, 'split');
    const v = numsOf(splitInput);
    return v === undefined ? { unknown: true, uneven } : { split: v, uneven };
  }
  if (ctx.opset < 13 && ctx.has('split')) return { split: ctx.ints('split'), uneven };
  return { uneven };
}

const Split: OpHandler = {
  op: 'Split',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const nOut = ctx.node.outputs.length;
    const spec = splitSpec(ctx, inputs[1]);
    if (x.shape === undefined) return Array.from({ length: nOut }, () => ({ dtype: x.dtype, shape: undefined }));
    const rank = x.shape.length;
    const axis = axesOf(ctx, [ctx.int('axis', 0)], rank)[0]!;
    const sizes = spec.unknown ? unknownDims(nOut) : splitSizes(ctx, x.shape[axis]!, nOut, spec.split, spec.uneven);
    const xsym = rank === 1 ? symOf(x) : undefined;
    let off = 0;
    return sizes.map((s) => {
      const shape = [...x.shape!];
      shape[axis] = s;
      const out: InferOutput = { dtype: x.dtype, shape };
      if (xsym !== undefined && typeof s === 'number') out.sym = xsym.slice(off, off + s);
      off += typeof s === 'number' ? s : 0;
      return out;
    });
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const nOut = ctx.node.outputs.length;
    const spec = splitSpec(ctx, inputs[1]);
    const axis = axesOf(ctx, [ctx.int('axis', 0)], x.rank)[0]!;
    const sizes = splitSizes(ctx, x.dims[axis]!, nOut, spec.split, spec.uneven) as number[];
    const outer = sizeOf(x.dims.slice(0, axis));
    const inner = sizeOf(x.dims.slice(axis + 1));
    const rowLen = x.dims[axis]! * inner;
    let off = 0;
    return sizes.map((s) => {
      const dims = [...x.dims];
      dims[axis] = s;
      const out = allocData(x.dtype, sizeOf(dims));
      const c = s * inner;
      for (let o = 0; o < outer; o++) copyRun(out, o * c, x.data, o * rowLen + off * inner, c);
      off += s;
      return new Tensor(x.dtype, dims, out);
    });
  },
};

// ---------- Slice ----------

interface SliceArgs {
  starts?: Dim[];
  ends?: Dim[];
  axes?: number[];
  steps?: number[];
  /** False when axes or steps were given but are not known (inference only). */
  axesKnown: boolean;
}

/** Normalized axes and steps of a slice; fails on mismatched lengths, bad axes and zero steps. */
function sliceAxes(
  ctx: OpContext,
  n: number,
  rank: number,
  axes: number[] | undefined,
  steps: number[] | undefined,
): [number[], number[]] {
  const ax = axesOf(ctx, axes ?? Array.from({ length: n }, (_, i) => i), rank);
  const st = steps ?? ax.map(() => 1);
  if (ax.length !== n || st.length !== n)
    ctx.fail(`starts/ends/axes/steps lengths differ (${n}, ${ax.length}, ${st.length})`);
  if (st.some((s) => s === 0)) ctx.fail('slice step cannot be 0');
  return [ax, st];
}

function inferSlice(ctx: OpContext, x: InferInput, args: SliceArgs): InferOutput[] {
  if (x.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
  const rank = x.shape.length;
  if (!args.axesKnown || args.starts === undefined || args.ends === undefined) {
    const shape = [...x.shape];
    const ax = args.axesKnown && args.axes !== undefined ? axesOf(ctx, args.axes, rank) : shape.map((_, i) => i);
    for (const a of ax) shape[a] = unknownDim();
    return [{ dtype: x.dtype, shape }];
  }
  const { starts, ends } = args;
  if (starts.length !== ends.length) ctx.fail(`starts has ${starts.length} entries, ends ${ends.length}`);
  const [axes, steps] = sliceAxes(ctx, starts.length, rank, args.axes, args.steps);
  const shape = [...x.shape];
  axes.forEach((a, i) => {
    shape[a] = sliceLen(x.shape![a]!, starts[i]!, ends[i]!, steps[i]!);
  });
  const out: InferOutput = { dtype: x.dtype, shape };
  const xsym = rank === 1 ? symOf(x) : undefined;
  if (xsym !== undefined && axes.length === 1 && typeof starts[0] === 'number' && typeof ends[0] === 'number') {
    const [s, len] = sliceRange(xsym.length, starts[0], ends[0], steps[0]!);
    out.sym = Array.from({ length: len }, (_, j) => xsym[s + j * steps[0]!]!);
  }
  return [out];
}

/** Clamped start and length of a slice of a dim of size `dim`, per ONNX. */
function sliceRange(dim: number, start: number, end: number, step: number): [number, number] {
  let s = start < 0 ? start + dim : start;
  let e = end < 0 ? end + dim : end;
  if (step > 0) {
    s = Math.min(Math.max(s, 0), dim);
    e = Math.min(Math.max(e, 0), dim);
  } else {
    s = Math.min(Math.max(s, 0), dim - 1);
    e = Math.min(Math.max(e, -1), dim - 1);
  }
  return [s, Math.max(0, Math.ceil((e - s) / step))];
}

function evalSlice(
  ctx: OpContext,
  x: Tensor,
  starts: number[],
  ends: number[],
  axes0: number[] | undefined,
  steps0: number[] | undefined,
): Tensor {
  if (starts.length !== ends.length) ctx.fail(`starts has ${starts.length} entries, ends ${ends.length}`);
  const [axes, steps] = sliceAxes(ctx, starts.length, x.rank, axes0, steps0);
  const st = stridesOf(x.dims);
  const dims = [...x.dims];
  const maps = x.dims.map((d, a) => stridedMap(d, 0, 1, st[a]!));
  axes.forEach((a, i) => {
    const [s, len] = sliceRange(x.dims[a]!, starts[i]!, ends[i]!, steps[i]!);
    dims[a] = len;
    maps[a] = stridedMap(len, s, steps[i]!, st[a]!);
  });
  return takeByMaps(x, dims, maps);
}

/** An optional int input of Slice as numbers (inference): [known, values]. */
function optInts(ctx: OpContext, x: InferInput | undefined, what: string): [boolean, number[] | undefined] {
  if (x === undefined) return [true, undefined];
  needIndexType(ctx, x.dtype, what);
  const v = numsOf(x);
  return [v !== undefined, v];
}

const Slice10: OpHandler = {
  op: 'Slice',
  since: 10,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const s = need(ctx, inputs, 1);
    const e = need(ctx, inputs, 2);
    needIndexType(ctx, s.dtype, 'starts');
    needIndexType(ctx, e.dtype, 'ends');
    const [axKnown, axes] = optInts(ctx, inputs[3], 'axes');
    const [stKnown, steps] = optInts(ctx, inputs[4], 'steps');
    return inferSlice(ctx, x, { starts: symOf(s), ends: symOf(e), axes, steps, axesKnown: axKnown && stKnown });
  },
  eval(ctx, inputs) {
    const ints = (i: number) => (inputs[i] === undefined ? undefined : Array.from(inputs[i]!.nums));
    return [evalSlice(ctx, need(ctx, inputs, 0), ints(1)!, ints(2)!, ints(3), ints(4))];
  },
};

const Slice1: OpHandler = {
  op: 'Slice',
  until: 10,
  infer(ctx, inputs) {
    const axes = ctx.has('axes') ? ctx.ints('axes') : undefined;
    return inferSlice(ctx, need(ctx, inputs, 0), {
      starts: ctx.ints('starts'),
      ends: ctx.ints('ends'),
      axes,
      axesKnown: true,
    });
  },
  eval(ctx, inputs) {
    const axes = ctx.has('axes') ? ctx.ints('axes') : undefined;
    return [evalSlice(ctx, need(ctx, inputs, 0), ctx.ints('starts'), ctx.ints('ends'), axes, undefined)];
  },
};

// ---------- Pad ----------

const PAD_MODES = ['constant', 'reflect', 'edge', 'wrap'];

/** Per-axis [begin..., end...] pads over all axes, from pads given for `axes` (default all). */
function fullPads<T extends Dim>(
  ctx: OpContext,
  rank: number,
  pads: readonly T[],
  axes: readonly number[] | undefined,
): Dim[] {
  const ax = axes === undefined ? Array.from({ length: rank }, (_, i) => i) : axesOf(ctx, axes, rank);
  if (pads.length !== 2 * ax.length) ctx.fail(`pads has ${pads.length} entries, expected ${2 * ax.length}`);
  const out: Dim[] = new Array<Dim>(2 * rank).fill(0);
  ax.forEach((a, i) => {
    out[a] = pads[i]!;
    out[a + rank] = pads[i + ax.length]!;
  });
  return out;
}

function padMode(ctx: OpContext): string {
  const mode = ctx.string('mode', 'constant');
  if (!PAD_MODES.includes(mode) || (mode === 'wrap' && ctx.opset < 19)) ctx.fail(`unsupported pad mode '${mode}'`);
  return mode;
}

function inferPad(
  ctx: OpContext,
  x: InferInput,
  pads: Dim[] | undefined,
  axes: number[] | undefined,
  axesKnown: boolean,
): InferOutput[] {
  padMode(ctx);
  if (x.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
  const rank = x.shape.length;
  if (pads === undefined || !axesKnown) return [{ dtype: x.dtype, shape: unknownDims(rank) }];
  const full = fullPads(ctx, rank, pads, axes);
  const shape = x.shape.map((d, i) => dimAdd(dimAdd(d, full[i]!), full[i + rank]!));
  for (const d of shape) if (typeof d === 'number' && d < 0) ctx.fail(`pads [${pads}] give a negative dim`);
  return [{ dtype: x.dtype, shape }];
}

/** Source coordinate of output coordinate j along an axis of size n padded by `begin`, or -1 for the fill. */
function padSource(mode: string, j: number, begin: number, n: number): number {
  const p = j - begin;
  if (p >= 0 && p < n) return p;
  switch (mode) {
    case 'edge':
      return p < 0 ? 0 : n - 1;
    case 'wrap':
      return ((p % n) + n) % n;
    case 'reflect': {
      if (n === 1) return 0;
      const period = 2 * (n - 1);
      const q = ((p % period) + period) % period;
      return q < n ? q : period - q;
    }
    default:
      return -1;
  }
}

function evalPad(
  ctx: OpContext,
  x: Tensor,
  pads: number[],
  axes: number[] | undefined,
  value: number | string,
): Tensor {
  const mode = padMode(ctx);
  const rank = x.rank;
  const full = fullPads(ctx, rank, pads, axes) as number[];
  const st = stridesOf(x.dims);
  const dims = x.dims.map((d, i) => d + full[i]! + full[i + rank]!);
  if (dims.some((d) => d < 0)) ctx.fail(`pads [${pads}] give a negative dim`);
  const maps = dims.map((len, a) => {
    const n = x.dims[a]!;
    if (n === 0 && mode !== 'constant' && len > 0) ctx.fail(`cannot pad an empty axis in ${mode} mode`);
    const m = new Int32Array(len);
    for (let j = 0; j < len; j++) {
      const p = padSource(mode, j, full[a]!, n);
      m[j] = p < 0 ? -1 : p * st[a]!;
    }
    return m;
  });
  return takeByMaps(x, dims, maps, value);
}

const Pad11: OpHandler = {
  op: 'Pad',
  since: 11,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const p = need(ctx, inputs, 1);
    needInt64(ctx, p.dtype, 'pads');
    const v = inputs[2];
    if (v !== undefined && v.dtype !== x.dtype) ctx.fail(`constant_value is ${v.dtype}, data is ${x.dtype}`);
    const [axKnown, axes] = optInts(ctx, inputs[3], 'axes');
    return inferPad(ctx, x, symOf(p), axes, axKnown);
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const v = inputs[2];
    const value = v === undefined || v.size === 0 ? (x.dtype === 'string' ? '' : 0) : v.data[0]!;
    const axes = inputs[3] === undefined ? undefined : Array.from(inputs[3].nums);
    return [evalPad(ctx, x, Array.from(need(ctx, inputs, 1).nums), axes, value)];
  },
};

const Pad2: OpHandler = {
  op: 'Pad',
  until: 11,
  infer(ctx, inputs) {
    return inferPad(ctx, need(ctx, inputs, 0), padsAttr(ctx), undefined, true);
  },
  eval(ctx, inputs) {
    return [evalPad(ctx, need(ctx, inputs, 0), padsAttr(ctx), undefined, ctx.float('value', 0))];
  },
};

function padsAttr(ctx: OpContext): number[] {
  return ctx.has('pads') ? ctx.ints('pads') : ctx.ints('paddings');
}

// ---------- Tile ----------

const Tile: OpHandler = {
  op: 'Tile',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const r = need(ctx, inputs, 1);
    needInt64(ctx, r.dtype, 'repeats');
    if (x.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
    const reps = symOf(r);
    if (reps === undefined) return [{ dtype: x.dtype, shape: unknownDims(x.shape.length) }];
    if (reps.length !== x.shape.length) ctx.fail(`repeats has ${reps.length} entries for rank ${x.shape.length}`);
    return [{ dtype: x.dtype, shape: x.shape.map((d, i) => dimMul(d, reps[i]!)) }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const reps = Array.from(need(ctx, inputs, 1).nums);
    if (reps.length !== x.rank) ctx.fail(`repeats has ${reps.length} entries for rank ${x.rank}`);
    if (reps.some((v) => v < 0)) ctx.fail(`repeats [${reps}] has a negative entry`);
    const st = stridesOf(x.dims);
    const dims = x.dims.map((d, i) => d * reps[i]!);
    const maps = dims.map((len, a) => {
      const m = new Int32Array(len);
      const n = x.dims[a]!;
      for (let j = 0; j < len; j++) m[j] = (j % n) * st[a]!;
      return m;
    });
    return [takeByMaps(x, dims, maps)];
  },
};

// ---------- Expand ----------

function expandDims(ctx: OpContext, dims: readonly number[], target: readonly number[]): number[] {
  try {
    return broadcastDims(dims, target);
  } catch {
    ctx.fail(`cannot expand [${dims}] to [${target}]`);
  }
}

const Expand: OpHandler = {
  op: 'Expand',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const s = need(ctx, inputs, 1);
    needInt64(ctx, s.dtype, 'shape');
    const target = symOf(s);
    if (target === undefined) {
      const n = s.shape?.[0];
      if (x.shape === undefined || typeof n !== 'number') return [{ dtype: x.dtype, shape: undefined }];
      return [{ dtype: x.dtype, shape: unknownDims(Math.max(n, x.shape.length)) }];
    }
    const shape = broadcastShapes(ctx, [x.shape, target]);
    const out: InferOutput = { dtype: x.dtype, shape };
    const xsym = symOf(x);
    if (xsym !== undefined && shape !== undefined && shape.length <= 1) {
      const len = shape.length === 0 ? 1 : shape[0]!;
      if (xsym.length === len) out.sym = xsym;
      else if (xsym.length === 1 && typeof len === 'number' && len <= 1024)
        out.sym = Array.from({ length: len }, () => xsym[0]!);
    }
    return [out];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const target = Array.from(need(ctx, inputs, 1).nums);
    const dims = expandDims(ctx, x.dims, target);
    const idx = broadcastIndex(x.dims, dims);
    if (idx === undefined) return [x.reshape(dims)];
    return [takeElems(x, dims, idx)];
  },
};

export const MOVEMENT_SLICE_OPS: OpHandler[] = [Concat, Split, Slice10, Slice1, Pad11, Pad2, Tile, Expand];
