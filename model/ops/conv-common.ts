// Shared geometry of the conv and pool operators: attributes, padding (auto_pad), output sizes, and 3-D canonical form.
import { isFloat, type DType } from '../../compiler/dtype.ts';
import { dimAdd, dimDiv, type Dim } from '../../compiler/symbolic.ts';
import type { OpContext } from './types.ts';

export type AutoPad = 'NOTSET' | 'SAME_UPPER' | 'SAME_LOWER' | 'VALID';

/** Window attributes of a conv or pool node, normalized to the number of spatial dims. */
export interface Window {
  kernel: number[];
  strides: number[];
  dilations: number[];
  /** Explicit pads as [begin..., end...] (zeros when auto_pad is set). */
  pads: number[];
  autoPad: AutoPad;
  ceil: boolean;
}

export function readAutoPad(ctx: OpContext): AutoPad {
  const a = ctx.string('auto_pad', 'NOTSET');
  if (a !== 'NOTSET' && a !== 'SAME_UPPER' && a !== 'SAME_LOWER' && a !== 'VALID') ctx.fail(`unknown auto_pad '${a}'`);
  return a;
}

/** Reads kernel_shape (or the given default), strides, dilations, pads, auto_pad and ceil_mode for `n` spatial dims. */
export function readWindow(ctx: OpContext, n: number, kernelDefault?: number[]): Window {
  const kernel = ctx.has('kernel_shape') ? ctx.ints('kernel_shape') : kernelDefault;
  if (kernel === undefined) return ctx.fail('the kernel_shape attribute is required');
  const strides = ctx.ints('strides', []);
  const dilations = ctx.ints('dilations', []);
  const pads = ctx.ints('pads', []);
  const w: Window = {
    kernel,
    strides: strides.length ? strides : new Array<number>(n).fill(1),
    dilations: dilations.length ? dilations : new Array<number>(n).fill(1),
    pads: pads.length ? pads : new Array<number>(2 * n).fill(0),
    autoPad: readAutoPad(ctx),
    ceil: ctx.int('ceil_mode', 0) !== 0,
  };
  if (w.kernel.length !== n) ctx.fail(`kernel_shape has ${w.kernel.length} dims, the input has ${n} spatial dims`);
  if (w.strides.length !== n) ctx.fail(`strides has ${w.strides.length} values, expected ${n}`);
  if (w.dilations.length !== n) ctx.fail(`dilations has ${w.dilations.length} values, expected ${n}`);
  if (w.pads.length !== 2 * n) ctx.fail(`pads has ${w.pads.length} values, expected ${2 * n}`);
  if (w.kernel.some((k) => k < 1)) ctx.fail(`kernel_shape must be positive, got [${w.kernel}]`);
  if (w.strides.some((s) => s < 1)) ctx.fail(`strides must be positive, got [${w.strides}]`);
  if (w.dilations.some((d) => d < 1)) ctx.fail(`dilations must be positive, got [${w.dilations}]`);
  if (w.pads.some((p) => p < 0)) ctx.fail(`pads must be non-negative, got [${w.pads}]`);
  if (w.autoPad !== 'NOTSET') w.pads = new Array<number>(2 * n).fill(0);
  return w;
}

/** The extent a dilated kernel covers. */
export function effectiveKernel(k: number, d: number): number {
  return (k - 1) * d + 1;
}

/**
 * Output size along one spatial axis (Conv and pools). With ceil_mode, a last window that would start
 * inside the end padding is dropped.
 */
export function outSize(inSize: number, w: Window, i: number): number {
  const s = w.strides[i]!,
    ek = effectiveKernel(w.kernel[i]!, w.dilations[i]!);
  if (w.autoPad === 'SAME_UPPER' || w.autoPad === 'SAME_LOWER') return Math.ceil(inSize / s);
  if (w.autoPad === 'VALID') return (w.ceil ? Math.ceil((inSize - ek) / s) : Math.floor((inSize - ek) / s)) + 1;
  const pb = w.pads[i]!,
    pe = w.pads[i + w.kernel.length]!;
  const span = inSize + pb + pe - ek;
  if (!w.ceil) return Math.floor(span / s) + 1;
  let out = Math.ceil(span / s) + 1;
  if ((out - 1) * s >= inSize + pb) out--;
  return out;
}

/** Symbolic output size (inference); exact for numbers, best effort for symbols. */
export function outSizeDim(inSize: Dim, w: Window, i: number): Dim {
  if (typeof inSize === 'number') return outSize(inSize, w, i);
  const s = w.strides[i]!,
    ek = effectiveKernel(w.kernel[i]!, w.dilations[i]!);
  if (w.autoPad === 'SAME_UPPER' || w.autoPad === 'SAME_LOWER') return dimDiv(dimAdd(inSize, s - 1), s);
  const pads = w.autoPad === 'VALID' ? 0 : w.pads[i]! + w.pads[i + w.kernel.length]!;
  const span = dimAdd(inSize, pads - ek);
  return dimAdd(dimDiv(w.ceil ? dimAdd(span, s - 1) : span, s), 1);
}

/** Begin/end pads actually used along each axis, resolving auto_pad SAME_* from the output size. */
export function resolvePads(inSizes: number[], w: Window, outSizes: number[]): { begin: number[]; end: number[] } {
  const n = inSizes.length;
  const begin: number[] = [],
    end: number[] = [];
  for (let i = 0; i < n; i++) {
    if (w.autoPad === 'SAME_UPPER' || w.autoPad === 'SAME_LOWER') {
      const total = Math.max(
        0,
        (outSizes[i]! - 1) * w.strides[i]! + effectiveKernel(w.kernel[i]!, w.dilations[i]!) - inSizes[i]!,
      );
      const small = Math.floor(total / 2);
      begin.push(w.autoPad === 'SAME_UPPER' ? small : total - small);
      end.push(w.autoPad === 'SAME_UPPER' ? total - small : small);
    } else {
      begin.push(w.pads[i]!);
      end.push(w.pads[i + n]!);
    }
  }
  return { begin, end };
}

/**
 * A conv/pool problem in canonical 3-D form: spatial dims padded in front with size-1 axes so one loop nest
 * serves 1-D, 2-D and 3-D inputs. Index 0 = depth, 1 = height, 2 = width.
 */
export interface Geo3 {
  inS: [number, number, number];
  outS: [number, number, number];
  k: [number, number, number];
  s: [number, number, number];
  d: [number, number, number];
  /** Begin pads. */
  p: [number, number, number];
  /** End pads. */
  pe: [number, number, number];
}

/** Builds the canonical 3-D geometry; fails for more than 3 spatial dims or an empty output. */
export function geo3(
  ctx: OpContext,
  inSizes: number[],
  w: Window,
  outSizes: number[],
  pads: { begin: number[]; end: number[] },
): Geo3 {
  const n = inSizes.length;
  if (n < 1 || n > 3) ctx.fail(`only 1 to 3 spatial dims are supported, got ${n}`);
  if (outSizes.some((o) => o < 1))
    ctx.fail(`the output would be empty: spatial size [${outSizes}] from input [${inSizes}]`);
  const lift = (a: number[], fill: number): [number, number, number] => {
    const r: [number, number, number] = [fill, fill, fill];
    for (let i = 0; i < n; i++) r[3 - n + i] = a[i]!;
    return r;
  };
  return {
    inS: lift(inSizes, 1),
    outS: lift(outSizes, 1),
    k: lift(w.kernel, 1),
    s: lift(w.strides, 1),
    d: lift(w.dilations, 1),
    p: lift(pads.begin, 0),
    pe: lift(pads.end, 0),
  };
}

/** Fails unless the dtype is a float type. */
export function needFloat(ctx: OpContext, dtype: DType, what: string): void {
  if (!isFloat(dtype)) ctx.fail(`${what} must be a float tensor, got ${dtype}`);
}
