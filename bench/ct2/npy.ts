// Writes a float32 tensor as a NumPy .npy file (version 1.0: magic, a header dict padded to 64 bytes, little-endian data).
import * as fs from 'node:fs';
import type { Tensor } from '../../compiler/tensor.ts';

/** The .npy bytes of a float32 tensor, C order. */
export function npyBytes(t: Tensor): Buffer {
  if (t.dtype !== 'float32') throw new Error(`npy: only float32 tensors are written, not ${t.dtype}`);
  const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const f = t.nums as Float32Array;
  return Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(f.buffer, f.byteOffset, f.byteLength)]);
}

export function writeNpy(file: string, t: Tensor): void {
  fs.writeFileSync(file, npyBytes(t));
}
