// Seeded random feeds for any graph of a plan, from its declared inputs: token ids inside the vocabulary, masks with
// some padding, the past length, floats elsewhere; in-place caches hold NaN in the rows a step must not read.
import type { Plan } from '../../runtime/plan.ts';
import type { RtTensor } from '../../runtime/tensor.ts';
import { rng } from '../reference/rng.ts';

export interface FeedShape {
  batch: number;
  srcLen: number;
  past: number;
  vocab: number;
  seed: number;
}

export function randomFeeds(plan: Plan, graph: string, s: FeedShape): Record<string, RtTensor> {
  const r = rng(s.seed);
  const max = plan.header.profile.symbolMax;
  const feeds: Record<string, RtTensor> = {};
  for (const io of plan.inputs(graph)) {
    const dims = io.dims.map((d) =>
      /^\d+$/.test(d)
        ? Number(d)
        : /batch/.test(d)
          ? s.batch
          : /cache_capacity/.test(d)
            ? (max[d] ?? s.past + 1)
            : /past/.test(d)
              ? s.past
              : /encoder/.test(d)
                ? s.srcLen
                : /decoder_sequence|step_tokens/.test(d)
                  ? 1
                  : (max[d] ?? 1),
    );
    const n = dims.reduce((x, y) => x * y, 1);
    if (io.dtype === 'int64') {
      let v: (i: number) => bigint;
      if (/input_ids/.test(io.name)) v = () => BigInt(2 + Math.floor(r() * (s.vocab - 2)));
      else if (/past/.test(io.name)) v = () => BigInt(s.past);
      else if (/mask/.test(io.name))
        v = (i) => (i >= dims[1]! && i % dims[1]! >= dims[1]! - 2 ? 0n : 1n); // row 1+ ends in 2 pads
      else v = () => 1n;
      feeds[io.name] = { dtype: 'int64', dims, data: BigInt64Array.from({ length: n }, (_, i) => v(i)) };
    } else {
      const data = Float32Array.from({ length: n }, () => (r() + r() + r() - 1.5) * 0.5);
      if (io.name.startsWith('kv_cache.') && dims.length === 4) {
        const [b, h, cap, d] = dims as [number, number, number, number];
        for (let i = 0; i < b * h; i++) data.fill(NaN, (i * cap + s.past) * d, (i + 1) * cap * d);
      }
      feeds[io.name] = { dtype: 'float32', dims, data };
    }
  }
  return feeds;
}

/** A deep copy (runs write in-place caches into their feeds). */
export function cloneFeeds(f: Record<string, RtTensor>): Record<string, RtTensor> {
  return Object.fromEntries(
    Object.entries(f).map(([k, v]) => [k, { ...v, dims: [...v.dims], data: v.data.slice() } as RtTensor]),
  );
}
