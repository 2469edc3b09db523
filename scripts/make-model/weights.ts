// Seeded random weights (mulberry32, Irwin-Hall normal-ish), the shared weights.bin layout, and a streaming writer for it.
import * as fs from 'node:fs';
import type { GraphDef, TensorSpec } from './marian.ts';

/** Tensors of at least this many bytes go to weights.bin; smaller ones are inlined as raw_data. */
export const EXTERNAL_MIN_BYTES = 1024;
export const ALIGN = 64;
/** Floats generated or transposed per write (16 MiB). */
const CHUNK = 1 << 22;

/** Per-tensor 32-bit seed from the model seed and the tensor key (FNV-1a, murmur3 finalizer). */
export function tensorSeed(seed: number, key: string): number {
  let h = (0x811c9dc5 ^ Math.imul(seed >>> 0, 0x9e3779b1)) >>> 0;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A normal-ish(mean, std) stream: each value is an Irwin-Hall sum of four 16-bit uniforms (the halves of two mulberry32
 * draws), centred and scaled to the exact mean and std (bounded at ±3.46 std). About 10 ns a value, 4x Box-Muller.
 * fill() continues where the last call stopped, so chunking never changes the values.
 */
export class NormalStream {
  private s: number;
  constructor(
    seed: number,
    private readonly mean: number,
    private readonly std: number,
  ) {
    this.s = seed | 0;
  }

  fill(out: Float32Array): void {
    const mean = this.mean;
    const scale = (this.std * Math.sqrt(3)) / 65536; // var of a sum of 4 U(0,1) is 1/3
    let s = this.s;
    for (let i = 0; i < out.length; i++) {
      s = (s + 0x6d2b79f5) | 0;
      let t = Math.imul(s ^ (s >>> 15), 1 | s);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      const a = (t ^ (t >>> 14)) >>> 0;
      s = (s + 0x6d2b79f5) | 0;
      t = Math.imul(s ^ (s >>> 15), 1 | s);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      const b = (t ^ (t >>> 14)) >>> 0;
      const h = (a & 0xffff) + (a >>> 16) + (b & 0xffff) + (b >>> 16); // mean 131070
      out[i] = mean + (h - 131070) * scale;
    }
    this.s = s;
  }
}

export interface Layout {
  /** External tensors: key → byte range in weights.bin, in file order. */
  external: Map<string, { offset: number; length: number }>;
  /** Keys of tensors stored inside the graphs. */
  inline: Set<string>;
  /** Size of weights.bin (end of the last tensor). */
  size: number;
}

export const elements = (dims: number[]) => dims.reduce((a, b) => a * b, 1);

/** Each distinct tensor once, in order of first use over the graphs, 64-byte aligned; small tensors inline. */
export function planLayout(graphs: GraphDef[], tensors: Map<string, TensorSpec>): Layout {
  const external = new Map<string, { offset: number; length: number }>();
  const inline = new Set<string>();
  let end = 0;
  for (const g of graphs) {
    for (const [, key] of g.initializers) {
      if (external.has(key) || inline.has(key)) continue;
      const length = elements(tensors.get(key)!.dims) * 4;
      if (length < EXTERNAL_MIN_BYTES) {
        inline.add(key);
        continue;
      }
      const offset = Math.ceil(end / ALIGN) * ALIGN;
      external.set(key, { offset, length });
      end = offset + length;
    }
  }
  return { external, inline, size: end };
}

function u8(a: Float32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

function writeAll(fd: number, data: Uint8Array, position: number): void {
  let done = 0;
  while (done < data.length) done += fs.writeSync(fd, data, done, data.length - done, position + done);
}

/** Transposes rows [r0, r0+nr) of a [R, C] matrix (given as `rows`) into `out` as [C, nr]. */
function transposeBlock(rows: Float32Array, nr: number, C: number, out: Float32Array): void {
  const B = 16;
  for (let c0 = 0; c0 < C; c0 += B) {
    const c1 = Math.min(C, c0 + B);
    for (let r = 0; r < nr; r++) {
      const base = r * C;
      for (let c = c0; c < c1; c++) out[c * nr + r] = rows[base + c];
    }
  }
}

/** Values of an inline tensor (small: generated in one piece; a transpose is computed from its source). */
export function inlineData(spec: TensorSpec, tensors: Map<string, TensorSpec>, seed: number): Float32Array {
  if (spec.init.kind === 'normal') {
    const out = new Float32Array(elements(spec.dims));
    new NormalStream(tensorSeed(seed, spec.key), spec.init.mean, spec.init.std).fill(out);
    return out;
  }
  const src = tensors.get(spec.init.of)!;
  const [R, C] = src.dims;
  const out = new Float32Array(R * C);
  transposeBlock(inlineData(src, tensors, seed), R, C, out);
  return out;
}

/**
 * Writes weights.bin tensor by tensor (never the whole file in memory). A transposed copy is written alongside its
 * source: each generated row block of the source is also scattered, column by column, to the copy's rows.
 */
export function writeWeights(file: string, layout: Layout, tensors: Map<string, TensorSpec>, seed: number): void {
  const copies = new Map<string, string>(); // source key → transposed key (both external)
  for (const key of layout.external.keys()) {
    const init = tensors.get(key)!.init;
    if (init.kind === 'transpose') {
      if (!layout.external.has(init.of))
        throw new Error(`transposed tensor ${key} is external but its source ${init.of} is not`);
      copies.set(init.of, key);
    }
  }
  const fd = fs.openSync(file, 'w');
  try {
    for (const [key, { offset }] of layout.external) {
      const spec = tensors.get(key)!;
      if (spec.init.kind !== 'normal') continue;
      const stream = new NormalStream(tensorSeed(seed, key), spec.init.mean, spec.init.std);
      const n = elements(spec.dims);
      const copy = copies.get(key);
      if (!copy) {
        const buf = new Float32Array(Math.min(n, CHUNK));
        for (let done = 0; done < n; done += buf.length) {
          const part = done + buf.length <= n ? buf : buf.subarray(0, n - done);
          stream.fill(part);
          writeAll(fd, u8(part), offset + done * 4);
        }
        continue;
      }
      const [R, C] = spec.dims;
      const target = layout.external.get(copy)!.offset;
      const rowsPer = Math.max(1, Math.floor(CHUNK / C));
      const rows = new Float32Array(Math.min(R, rowsPer) * C);
      const cols = new Float32Array(rows.length);
      for (let r0 = 0; r0 < R; r0 += rowsPer) {
        const nr = Math.min(rowsPer, R - r0);
        const part = rows.subarray(0, nr * C);
        stream.fill(part);
        writeAll(fd, u8(part), offset + r0 * C * 4);
        transposeBlock(part, nr, C, cols);
        for (let c = 0; c < C; c++) writeAll(fd, u8(cols.subarray(c * nr, (c + 1) * nr)), target + (c * R + r0) * 4);
      }
    }
    fs.ftruncateSync(fd, layout.size);
  } finally {
    fs.closeSync(fd);
  }
}
