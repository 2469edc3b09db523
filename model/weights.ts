// The weight store of a Model: each distinct tensor kept once, identified by a hash of its dtype, dims and bytes.
import { createHash } from 'node:crypto';
import type { Weight } from '../compiler/ir.ts';
import type { Tensor } from '../compiler/tensor.ts';
import { toRaw } from './onnx/tensor-proto.ts';

/** The content id of a tensor (a hash of its dtype, dims and little-endian bytes): equal tensors share one id. */
export function weightId(tensor: Tensor, raw: Uint8Array = toRaw(tensor)): string {
  const h = createHash('sha256');
  h.update(`${tensor.dtype}[${tensor.dims.join(',')}]`);
  h.update(raw);
  return h.digest('hex').slice(0, 24);
}

export class WeightStore {
  readonly weights = new Map<string, Weight>();
  /** Bytes as stored in the source files, every occurrence counted. */
  storedBytes = 0;

  /** Adds a tensor (raw: its little-endian bytes when already at hand) and returns its id. */
  add(tensor: Tensor, raw?: Uint8Array): string {
    const bytes = tensor.dtype === 'string' ? Buffer.from(JSON.stringify(tensor.strings)) : (raw ?? toRaw(tensor));
    const id = weightId(tensor, bytes);
    this.storedBytes += bytes.length;
    if (!this.weights.has(id)) this.weights.set(id, { id, tensor, bytes: bytes.length });
    return id;
  }

  /** Bytes of the distinct weights. */
  get uniqueBytes(): number {
    let s = 0;
    for (const w of this.weights.values()) s += w.bytes;
    return s;
  }
}
