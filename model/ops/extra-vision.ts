// Vision operators: NonMaxSuppression, RoiAlign (10: output_half_pixel; 16: coordinate_transformation_mode) and Col2Im.
import { unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { fromF64, knownInts, requireFloat } from './math-common.ts';
import type { OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

// ---- NonMaxSuppression ----

/** Whether box a and box b (by index into the batch's boxes) overlap by more than the IoU threshold (float32 math for float32 boxes). */
function suppresses(
  b: ArrayLike<number>,
  i: number,
  j: number,
  center: boolean,
  iou: number,
  r: (x: number) => number,
): boolean {
  const p = (k: number, c: number) => b[k * 4 + c]!;
  let ax0: number, ax1: number, ay0: number, ay1: number, bx0: number, bx1: number, by0: number, by1: number;
  if (!center) {
    [ax0, ax1] = [Math.min(p(i, 1), p(i, 3)), Math.max(p(i, 1), p(i, 3))];
    [bx0, bx1] = [Math.min(p(j, 1), p(j, 3)), Math.max(p(j, 1), p(j, 3))];
    [ay0, ay1] = [Math.min(p(i, 0), p(i, 2)), Math.max(p(i, 0), p(i, 2))];
    [by0, by1] = [Math.min(p(j, 0), p(j, 2)), Math.max(p(j, 0), p(j, 2))];
  } else {
    const aw = r(p(i, 2) / 2),
      ah = r(p(i, 3) / 2),
      bw = r(p(j, 2) / 2),
      bh = r(p(j, 3) / 2);
    [ax0, ax1, bx0, bx1] = [r(p(i, 0) - aw), r(p(i, 0) + aw), r(p(j, 0) - bw), r(p(j, 0) + bw)];
    [ay0, ay1, by0, by1] = [r(p(i, 1) - ah), r(p(i, 1) + ah), r(p(j, 1) - bh), r(p(j, 1) + bh)];
  }
  const ix0 = Math.max(ax0, bx0),
    ix1 = Math.min(ax1, bx1);
  if (ix1 <= ix0) return false;
  const iy0 = Math.max(ay0, by0),
    iy1 = Math.min(ay1, by1);
  if (iy1 <= iy0) return false;
  const inter = r(r(ix1 - ix0) * r(iy1 - iy0));
  if (inter <= 0) return false;
  const areaA = r(r(ax1 - ax0) * r(ay1 - ay0));
  const areaB = r(r(bx1 - bx0) * r(by1 - by0));
  const union = r(r(areaA + areaB) - inter);
  if (areaA <= 0 || areaB <= 0 || union <= 0) return false;
  return r(inter / union) > iou;
}

function firstOr(t: Tensor | undefined, def: number): number {
  return t && t.size > 0 ? Number(t.nums[0]) : def;
}

const NON_MAX_SUPPRESSION: OpHandler = {
  op: 'NonMaxSuppression',
  since: 10,
  infer(ctx, inputs) {
    const boxes = need(ctx, inputs, 0);
    const scores = need(ctx, inputs, 1);
    requireFloat(ctx, boxes.dtype, 'boxes');
    if (scores.dtype !== boxes.dtype) ctx.fail(`scores dtype ${scores.dtype} does not match boxes ${boxes.dtype}`);
    if (boxes.shape && (boxes.shape.length !== 3 || boxes.shape[2] !== 4)) ctx.fail('boxes must be [batch, boxes, 4]');
    if (scores.shape && scores.shape.length !== 3) ctx.fail('scores must be [batch, classes, boxes]');
    return [{ dtype: 'int64', shape: [unknownDim(), 3] }];
  },
  eval(ctx, inputs) {
    const boxes = need(ctx, inputs, 0);
    const scores = need(ctx, inputs, 1);
    if (boxes.rank !== 3 || boxes.dims[2] !== 4) ctx.fail(`boxes must be [batch, boxes, 4], got dims [${boxes.dims}]`);
    if (scores.rank !== 3 || scores.dims[0] !== boxes.dims[0] || scores.dims[2] !== boxes.dims[1]) {
      ctx.fail(`scores dims [${scores.dims}] do not fit boxes dims [${boxes.dims}]`);
    }
    const center = ctx.int('center_point_box', 0) !== 0;
    const maxOut = Math.max(0, firstOr(inputs[2], 0));
    const iou = firstOr(inputs[3], 0);
    const hasScoreThreshold = inputs[4] !== undefined && inputs[4].size > 0;
    const scoreThreshold = firstOr(inputs[4], 0);
    const r = boxes.dtype === 'float32' ? Math.fround : (x: number) => x;
    const [nb, nc, nbox] = [scores.dims[0]!, scores.dims[1]!, scores.dims[2]!];
    const out: number[] = [];
    const bv = boxes.nums;
    const sv = scores.nums;
    for (let b = 0; b < nb; b++) {
      const batchBoxes = bv.subarray(b * nbox * 4, (b + 1) * nbox * 4);
      for (let c = 0; c < nc; c++) {
        const base = (b * nc + c) * nbox;
        const cand: number[] = [];
        for (let i = 0; i < nbox; i++) if (!hasScoreThreshold || sv[base + i]! > scoreThreshold) cand.push(i);
        // highest score first; ties: lower box index first
        cand.sort((x, y) => sv[base + y]! - sv[base + x]! || x - y);
        const kept: number[] = [];
        for (const i of cand) {
          if (kept.length >= maxOut) break;
          if (kept.some((k) => suppresses(batchBoxes, i, k, center, iou, r))) continue;
          kept.push(i);
          out.push(b, c, i);
        }
      }
    }
    return [Tensor.fromNumbers('int64', [out.length / 3, 3], out)];
  },
};

// ---- RoiAlign ----

interface Sample {
  pos: [number, number, number, number];
  w: [number, number, number, number];
}

function bilinearSamples(
  h: number,
  w: number,
  ph: number,
  pw: number,
  gridH: number,
  gridW: number,
  startH: number,
  startW: number,
  binH: number,
  binW: number,
): Sample[] {
  const out: Sample[] = [];
  for (let py = 0; py < ph; py++) {
    for (let px = 0; px < pw; px++) {
      for (let iy = 0; iy < gridH; iy++) {
        const yy = startH + py * binH + ((iy + 0.5) * binH) / gridH;
        for (let ix = 0; ix < gridW; ix++) {
          const xx = startW + px * binW + ((ix + 0.5) * binW) / gridW;
          if (yy < -1 || yy > h || xx < -1 || xx > w) {
            out.push({ pos: [0, 0, 0, 0], w: [0, 0, 0, 0] });
            continue;
          }
          let y = Math.max(yy, 0);
          let x = Math.max(xx, 0);
          let yl = Math.trunc(y),
            xl = Math.trunc(x);
          let yh: number, xh: number;
          if (yl >= h - 1) {
            yh = yl = h - 1;
            y = yl;
          } else yh = yl + 1;
          if (xl >= w - 1) {
            xh = xl = w - 1;
            x = xl;
          } else xh = xl + 1;
          const ly = y - yl,
            lx = x - xl,
            hy = 1 - ly,
            hx = 1 - lx;
          out.push({
            pos: [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh],
            w: [hy * hx, hy * lx, ly * hx, ly * lx],
          });
        }
      }
    }
  }
  return out;
}

function roiAttrs(ctx: OpContext): {
  mode: string;
  oh: number;
  ow: number;
  ratio: number;
  scale: number;
  halfPixel: boolean;
} {
  const mode = ctx.string('mode', 'avg');
  if (mode !== 'avg' && mode !== 'max') ctx.fail(`mode must be avg or max, got '${mode}'`);
  const ctm = ctx.opset >= 16 ? ctx.string('coordinate_transformation_mode', 'half_pixel') : 'output_half_pixel';
  if (ctm !== 'half_pixel' && ctm !== 'output_half_pixel')
    ctx.fail(`coordinate_transformation_mode '${ctm}' is not valid`);
  return {
    mode,
    halfPixel: ctm === 'half_pixel',
    oh: ctx.int('output_height', 1),
    ow: ctx.int('output_width', 1),
    ratio: ctx.int('sampling_ratio', 0),
    scale: ctx.float('spatial_scale', 1),
  };
}

function roiAlign(ctx: OpContext, x: Tensor, rois: Tensor, idx: Tensor): Tensor {
  const a = roiAttrs(ctx);
  if (x.rank !== 4) ctx.fail(`X must be [N, C, H, W], got dims [${x.dims}]`);
  if (rois.rank !== 2 || rois.dims[1] !== 4) ctx.fail(`rois must be [num_rois, 4], got dims [${rois.dims}]`);
  const nr = rois.dims[0]!;
  if (idx.size !== nr) ctx.fail(`batch_indices has ${idx.size} elements, expected ${nr}`);
  const [n, c, h, w] = x.dims as [number, number, number, number];
  const { oh, ow } = a;
  const out = new Float64Array(nr * c * oh * ow);
  const xv = x.nums;
  const rv = rois.nums;
  const off = a.halfPixel ? 0.5 : 0;
  for (let r = 0; r < nr; r++) {
    const bi = Number(idx.nums[r]);
    if (bi < 0 || bi >= n) ctx.fail(`batch index ${bi} is out of range [0, ${n})`);
    const sw = rv[r * 4]! * a.scale - off,
      sh = rv[r * 4 + 1]! * a.scale - off;
    const ew = rv[r * 4 + 2]! * a.scale - off,
      eh = rv[r * 4 + 3]! * a.scale - off;
    let rw = ew - sw,
      rh = eh - sh;
    if (!a.halfPixel) {
      rw = Math.max(rw, 1);
      rh = Math.max(rh, 1);
    }
    const binH = rh / oh,
      binW = rw / ow;
    const gridH = a.ratio > 0 ? a.ratio : Math.ceil(rh / oh);
    const gridW = a.ratio > 0 ? a.ratio : Math.ceil(rw / ow);
    const count = Math.max(gridH * gridW, 1);
    const samples = bilinearSamples(h, w, oh, ow, gridH, gridW, sh, sw, binH, binW);
    for (let ch = 0; ch < c; ch++) {
      const base = (bi * c + ch) * h * w;
      let s = 0;
      for (let p = 0; p < oh * ow; p++) {
        let v = 0;
        let first = true;
        for (let g = 0; g < gridH * gridW; g++, s++) {
          const sm = samples[s]!;
          const t = sm.w.map((wt, k) => wt * xv[base + sm.pos[k]!]!);
          if (a.mode === 'avg') v += t[0]! + t[1]! + t[2]! + t[3]!;
          else {
            const m = Math.max(t[0]!, t[1]!, t[2]!, t[3]!);
            v = first ? m : Math.max(v, m);
            first = false;
          }
        }
        out[(r * c + ch) * oh * ow + p] = a.mode === 'avg' ? v / count : v;
      }
    }
  }
  return fromF64(x.dtype, [nr, c, oh, ow], out);
}

const ROI_ALIGN: OpHandler = {
  op: 'RoiAlign',
  since: 10,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const rois = need(ctx, inputs, 1);
    const idx = need(ctx, inputs, 2);
    requireFloat(ctx, x.dtype);
    if (rois.dtype !== x.dtype) ctx.fail(`rois dtype ${rois.dtype} does not match X ${x.dtype}`);
    if (idx.dtype !== 'int64') ctx.fail(`batch_indices must be int64, got ${idx.dtype}`);
    const a = roiAttrs(ctx);
    const nr: Dim = rois.shape?.[0] ?? idx.shape?.[0] ?? unknownDim();
    return [{ dtype: x.dtype, shape: [nr, x.shape?.[1] ?? unknownDim(), a.oh, a.ow] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    return [roiAlign(ctx, x, need(ctx, inputs, 1), need(ctx, inputs, 2))];
  },
};

// ---- Col2Im: sums sliding blocks [N, C*prod(block), L] back into an image [N, C, *image_shape] ----

interface Col2ImGeo {
  img: number[];
  block: number[];
  dil: number[];
  padB: number[];
  str: number[];
  cols: number[];
}

function col2imGeo(ctx: OpContext, img: number[], block: number[]): Col2ImGeo {
  const k = img.length;
  if (block.length !== k) ctx.fail(`block_shape has ${block.length} elements, image_shape ${k}`);
  const dil = ctx.ints('dilations', new Array<number>(k).fill(1));
  const pads = ctx.ints('pads', new Array<number>(2 * k).fill(0));
  const str = ctx.ints('strides', new Array<number>(k).fill(1));
  if (dil.length !== k || str.length !== k || pads.length !== 2 * k)
    ctx.fail('dilations, strides and pads must match the image rank');
  const cols = img.map(
    (d, i) => Math.floor((d + pads[i]! + pads[i + k]! - (dil[i]! * (block[i]! - 1) + 1)) / str[i]!) + 1,
  );
  if (cols.some((c) => c < 1)) ctx.fail(`no sliding block fits: blocks per dim [${cols}]`);
  return { img, block, dil, padB: pads.slice(0, k), str, cols };
}

function col2im(ctx: OpContext, x: Tensor, g: Col2ImGeo): Tensor {
  if (x.rank !== 3) ctx.fail(`input must be [N, C*prod(block_shape), L], got dims [${x.dims}]`);
  const k = g.img.length;
  const bl = g.block.reduce((a, b) => a * b, 1);
  const L = g.cols.reduce((a, b) => a * b, 1);
  if (x.dims[1]! % bl !== 0) ctx.fail(`input dim 1 (${x.dims[1]}) is not divisible by the block size ${bl}`);
  if (x.dims[2] !== L) ctx.fail(`input dim 2 (${x.dims[2]}) must equal the number of blocks ${L}`);
  const [n, c] = [x.dims[0]!, x.dims[1]! / bl];
  const imgSize = g.img.reduce((a, b) => a * b, 1);
  const out = new Float64Array(n * c * imgSize);
  const xv = x.nums;
  const off = new Array<number>(k),
    col = new Array<number>(k);
  for (let nc = 0; nc < n * c; nc++) {
    for (let kb = 0; kb < bl; kb++) {
      unravel(kb, g.block, off);
      for (let l = 0; l < L; l++) {
        unravel(l, g.cols, col);
        let idx = 0;
        let inside = true;
        for (let i = 0; i < k; i++) {
          const p = col[i]! * g.str[i]! - g.padB[i]! + off[i]! * g.dil[i]!;
          if (p < 0 || p >= g.img[i]!) {
            inside = false;
            break;
          }
          idx = idx * g.img[i]! + p;
        }
        if (inside) out[nc * imgSize + idx] += xv[(nc * bl + kb) * L + l]!;
      }
    }
  }
  return fromF64(x.dtype, [n, c, ...g.img], out);
}

function unravel(i: number, dims: number[], out: number[]): void {
  for (let d = dims.length - 1; d >= 0; d--) {
    out[d] = i % dims[d]!;
    i = Math.floor(i / dims[d]!);
  }
}

const COL2IM: OpHandler = {
  op: 'Col2Im',
  since: 18,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const img = knownInts(need(ctx, inputs, 1));
    const block = knownInts(need(ctx, inputs, 2));
    if (x.dtype === 'string') ctx.fail('input must be numeric');
    if (x.shape && x.shape.length !== 3) ctx.fail(`input must have rank 3, got ${x.shape.length}`);
    if (!img) return [{ dtype: x.dtype, shape: undefined }];
    const n: Dim = x.shape?.[0] ?? unknownDim();
    const c1 = x.shape?.[1];
    const c: Dim = block && typeof c1 === 'number' ? c1 / block.reduce((a, b) => a * b, 1) : unknownDim();
    return [{ dtype: x.dtype, shape: [n, c, ...img] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const img = Array.from(need(ctx, inputs, 1).nums, Number);
    const block = Array.from(need(ctx, inputs, 2).nums, Number);
    return [col2im(ctx, x, col2imGeo(ctx, img, block))];
  },
};

export const VISION_OPS: OpHandler[] = [NON_MAX_SUPPRESSION, ROI_ALIGN, COL2IM];
