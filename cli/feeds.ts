// Reads feeds for `planc run`: JSON ({name: nested arrays} or {name: {dtype, dims, data}}) or NumPy .npz files.
import * as fs from 'node:fs';
import { unzipSync } from 'fflate';
import { PlancError } from '../compiler/diagnostics.ts';
import type { IOInfo } from '../runtime/plan.ts';
import { feedTensor } from '../runtime/feeds-check.ts';
import type { RtDType, RtTensor } from '../runtime/tensor.ts';

/** Reads feeds from a .json or .npz file, using the plan's input dtypes for plain JSON arrays. */
export function readFeeds(file: string, inputs: IOInfo[]): Record<string, RtTensor> {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', `no such feeds file: ${file}`, { file });
  if (file.endsWith('.npz')) return readNpz(file);
  let j: unknown;
  try {
    j = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new PlancError('PLANC_E405', `feeds file is not valid JSON: ${(e as Error).message}`, { file });
  }
  if (j === null || typeof j !== 'object' || Array.isArray(j)) {
    throw new PlancError(
      'PLANC_E405',
      `feeds file holds ${j === null ? 'null' : Array.isArray(j) ? 'an array' : typeof j}; it must hold an object of feeds by name ({"input_ids": [[5, 6, 0]], ...})`,
      { file },
    );
  }
  const out: Record<string, RtTensor> = {};
  for (const [name, v] of Object.entries(j)) {
    const info = inputs.find((i) => i.name === name);
    const where = { file, node: name };
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const o = v as { dtype?: RtDType; dims?: number[]; data?: number[] };
      if (!o.dims || !Array.isArray(o.data))
        throw new PlancError('PLANC_E405', `feed '${name}' needs dims and data (an array)`, where);
      out[name] = feedTensor(name, o.dtype ?? (info?.dtype as RtDType) ?? 'float32', o.dims, o.data, { file });
    } else {
      const { dims, flat } = nestedArray(name, v, where);
      out[name] = feedTensor(name, (info?.dtype as RtDType) ?? 'float32', dims, flat, { file });
    }
  }
  return out;
}

/** The most axes a nested-array feed may have (plans' tensors have rank ≤ 8). */
const MAX_FEED_RANK = 8;

/**
 * A nested JSON array's dims and values in row-major order, without recursion: every row of an axis must have the
 * length of the first (a ragged array is refused naming the first row that differs), a number or boolean must sit at
 * every leaf and nowhere else, and at most MAX_FEED_RANK axes.
 */
export function nestedArray(
  name: string,
  v: unknown,
  where: { file: string; node: string },
): { dims: number[]; flat: unknown[] } {
  const bad = (m: string): never => {
    throw new PlancError('PLANC_E405', `feed '${name}' ${m}`, where);
  };
  const dims: number[] = [];
  for (let x: unknown = v; Array.isArray(x); x = x[0]) {
    if (dims.length === MAX_FEED_RANK)
      bad(`nests arrays more than ${MAX_FEED_RANK} deep; plans take tensors of rank ≤ ${MAX_FEED_RANK}`);
    dims.push(x.length);
  }
  const flat: unknown[] = [];
  const at = (path: number[]) => `${name}${path.map((i) => `[${i}]`).join('')}`;
  // iterative walk: (array, its axis, the index path to it)
  const stack: [unknown, number, number[]][] = [[v, 0, []]];
  while (stack.length) {
    const [x, axis, path] = stack.pop()!;
    if (axis === dims.length) {
      if (Array.isArray(x))
        bad(`is a ragged array: ${at(path)} is an array where ${at(path.slice(0, -1).concat(0))} holds a value`);
      if (typeof x !== 'number' && typeof x !== 'boolean')
        bad(`must hold numbers, but ${at(path)} is ${JSON.stringify(x) ?? String(x)}`);
      flat.push(x);
      continue;
    }
    if (!Array.isArray(x))
      bad(
        `is a ragged array: ${at(path)} is ${JSON.stringify(x) ?? String(x)} where an array of ${dims[axis]} is expected (dims [${dims}] from the first row of each axis)`,
      );
    const arr = x as unknown[];
    if (arr.length !== dims[axis])
      bad(
        `is a ragged array: ${at(path)} has ${arr.length} entries where ${at(path.slice(0, -1).concat(0))} has ${dims[axis]}`,
      );
    for (let i = arr.length - 1; i >= 0; i--) stack.push([arr[i], axis + 1, [...path, i]]);
  }
  return { dims, flat };
}

const NPY_DTYPES: Record<string, RtDType> = {
  '<f4': 'float32',
  '<f8': 'float64',
  '<i4': 'int32',
  '<i8': 'int64',
  '|i1': 'int8',
  '|u1': 'uint8',
  '|b1': 'bool',
  '<f2': 'float16',
};

/** A NumPy .npz: a zip of .npy arrays (written by hand: the .npy format is a magic, a header dict and the bytes). */
function readNpz(file: string): Record<string, RtTensor> {
  let files: Record<string, Uint8Array>;
  try {
    files = unzipSync(fs.readFileSync(file));
  } catch (e) {
    throw new PlancError('PLANC_E405', `not a valid .npz (zip) file: ${(e as Error).message}`, { file });
  }
  const out: Record<string, RtTensor> = {};
  for (const [entry, bytes] of Object.entries(files)) {
    const name = entry.replace(/\.npy$/, '');
    out[name] = parseNpy(bytes, `${file}:${entry}`);
  }
  return out;
}

export function parseNpy(b: Uint8Array, what: string): RtTensor {
  const bad = (m: string): never => {
    throw new PlancError('PLANC_E405', `${what}: ${m}`, { file: what });
  };
  if (b.length < 10 || b[0] !== 0x93 || String.fromCharCode(...b.subarray(1, 6)) !== 'NUMPY') bad('not a .npy array');
  const major = b[6]!;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const headLen = major === 1 ? dv.getUint16(8, true) : dv.getUint32(8, true);
  const start = (major === 1 ? 10 : 12) + headLen;
  const header = Buffer.from(b.subarray(major === 1 ? 10 : 12, start)).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*True/.test(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (!descr || shape === undefined) bad('unreadable header');
  if (fortran) bad('Fortran-ordered arrays are not supported');
  const dtype = NPY_DTYPES[descr!] ?? bad(`dtype ${descr} is not supported`);
  const dims = shape!
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s)
    .map(Number);
  const n = dims.reduce((a, c) => a * c, 1);
  const raw = b.slice(start);
  const Ctor = {
    float32: Float32Array,
    float64: Float64Array,
    int32: Int32Array,
    int64: BigInt64Array,
    int8: Int8Array,
    uint8: Uint8Array,
    bool: Uint8Array,
    float16: Uint16Array,
    bfloat16: Uint16Array,
  }[dtype];
  if (raw.length !== n * Ctor.BYTES_PER_ELEMENT) bad(`holds ${raw.length} bytes for shape (${dims}) of ${descr}`);
  return { dtype, dims, data: new Ctor(raw.buffer, raw.byteOffset, n) };
}
