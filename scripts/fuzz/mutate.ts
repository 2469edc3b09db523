// Deterministic mutators for the fuzzer: a seeded PRNG, byte-level edits, and edits of a decoded message tree
// (protobuf objects from onnx-proto/protobufjs, JSON objects). Every choice comes from the case's PRNG, so a case
// index and seed replay the same mutation.

export type Rng = () => number;

/** mulberry32: a small, fast, seedable PRNG (test/plan-fuzz.test.ts uses it too). */
export function rng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed of one case: the run's seed, the target and the case index mixed (FNV-1a). */
export function caseSeed(seed: number, target: string, index: number): number {
  let h = 0x811c9dc5;
  for (const c of `${seed}/${target}/${index}`) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  return h;
}

export const int = (r: Rng, n: number): number => Math.floor(r() * n);
export const pick = <T>(r: Rng, xs: readonly T[]): T => xs[int(r, xs.length)]!;

/** Numbers chosen to break bounds: zero, signs, off-by-one, powers of two around 32-bit and 53-bit limits. */
export function edgeNumber(r: Rng, old: number): number {
  return pick(r, [
    0,
    1,
    -1,
    old + 1,
    old - 1,
    old * 2,
    -old,
    2 ** 31,
    2 ** 31 - 1,
    2 ** 32 + 7,
    2 ** 40,
    2 ** 53,
    63,
    64,
    7,
    255,
    65536,
  ]);
}

// ---- bytes ----

export function flipBits(b: Uint8Array, r: Rng, count = 1 + int(r, 4), from = 0, to = b.length): Uint8Array {
  const out = b.slice();
  if (to <= from) return out;
  for (let k = 0; k < count; k++) out[from + int(r, to - from)]! ^= 1 << int(r, 8);
  return out;
}

export function truncate(b: Uint8Array, r: Rng): Uint8Array {
  return b.slice(0, int(r, b.length));
}

/** Overwrites a short run of bytes with 0x00, 0xff or random bytes. */
export function overwrite(b: Uint8Array, r: Rng, from = 0, to = b.length): Uint8Array {
  const out = b.slice();
  if (to <= from) return out;
  const at = from + int(r, to - from);
  const len = 1 + int(r, 16);
  const mode = int(r, 3);
  for (let i = at; i < Math.min(at + len, to); i++) out[i] = mode === 0 ? 0 : mode === 1 ? 0xff : int(r, 256);
  return out;
}

/** Deletes or duplicates a run of bytes (shifts everything after it). */
export function splice(b: Uint8Array, r: Rng): Uint8Array {
  const at = int(r, b.length);
  const len = 1 + int(r, Math.min(64, b.length - at));
  if (r() < 0.5) return new Uint8Array([...b.subarray(0, at), ...b.subarray(at + len)]);
  return new Uint8Array([...b.subarray(0, at + len), ...b.subarray(at, at + len), ...b.subarray(at + len)]);
}

/** One byte-level mutation, described. */
export function byteMutation(b: Uint8Array, r: Rng): [Uint8Array, string] {
  switch (int(r, 4)) {
    case 0: {
      const out = truncate(b, r);
      return [out, `truncated to ${out.length} of ${b.length} bytes`];
    }
    case 1:
      return [flipBits(b, r), 'bit flips'];
    case 2:
      return [overwrite(b, r), 'bytes overwritten'];
    default:
      return [splice(b, r), 'bytes deleted or duplicated'];
  }
}

// ---- trees (decoded protobuf messages, JSON) ----

type Holder = Record<string | number, unknown>;
interface Slot {
  holder: Holder;
  key: string | number;
  path: string;
}

/** Every slot of the tree whose value passes `want` (byte arrays are leaves, not walked). */
export function slots(root: unknown, want: (v: unknown) => boolean): Slot[] {
  const out: Slot[] = [];
  const walk = (x: unknown, path: string) => {
    if (x instanceof Uint8Array) return;
    if (Array.isArray(x))
      x.forEach((v, i) => {
        if (want(v)) out.push({ holder: x as unknown as Holder, key: i, path: `${path}[${i}]` });
        walk(v, `${path}[${i}]`);
      });
    else if (x && typeof x === 'object') {
      for (const [k, v] of Object.entries(x)) {
        if (want(v)) out.push({ holder: x as Holder, key: k, path: `${path}.${k}` });
        walk(v, `${path}.${k}`);
      }
    }
  };
  walk(root, '');
  return out;
}

/** Sets one number of the tree to an edge value; returns what it did (or undefined when there is no number). */
export function editNumber(root: unknown, r: Rng, values?: (old: number) => number): string | undefined {
  const s = slots(root, (v) => typeof v === 'number');
  if (!s.length) return undefined;
  const { holder, key, path } = pick(r, s);
  const old = holder[key] as number;
  const v = values ? values(old) : edgeNumber(r, old);
  holder[key] = v;
  return `${path}: ${old} -> ${v}`;
}

/** Replaces one string of the tree: with another string of the tree, empty, or one character changed. */
export function editString(root: unknown, r: Rng): string | undefined {
  const s = slots(root, (v) => typeof v === 'string');
  if (!s.length) return undefined;
  const { holder, key, path } = pick(r, s);
  const old = holder[key] as string;
  const mode = int(r, 4);
  let v: string;
  if (mode === 0) {
    const o = pick(r, s);
    v = String(o.holder[o.key]);
  } else if (mode === 1) v = '';
  else if (mode === 2 && old.length) {
    const i = int(r, old.length);
    v = old.slice(0, i) + String.fromCharCode(33 + int(r, 90)) + old.slice(i + 1);
  } else v = `${old}_x`;
  holder[key] = v;
  return `${path}: ${JSON.stringify(old).slice(0, 40)} -> ${JSON.stringify(v).slice(0, 40)}`;
}

/** Removes, duplicates or swaps elements of one non-empty array of the tree. */
export function editArray(root: unknown, r: Rng): string | undefined {
  const s = slots(root, (v) => Array.isArray(v) && v.length > 0);
  if (!s.length) return undefined;
  const { holder, key, path } = pick(r, s);
  const a = holder[key] as unknown[];
  const i = int(r, a.length);
  const mode = int(r, 3);
  if (mode === 0) {
    a.splice(i, 1);
    return `${path}: element ${i} of ${a.length + 1} removed`;
  }
  if (mode === 1) {
    a.splice(i, 0, structuredClone(a[i]));
    return `${path}: element ${i} duplicated`;
  }
  const j = int(r, a.length);
  [a[i], a[j]] = [a[j], a[i]];
  return `${path}: elements ${i} and ${j} swapped`;
}

/** One structured edit of a tree: a number, a string or an array. */
export function treeMutation(root: unknown, r: Rng): string {
  const order = [editNumber, editString, editArray];
  const first = int(r, 3);
  for (let k = 0; k < 3; k++) {
    const d = order[(first + k) % 3]!(root, r);
    if (d) return d;
  }
  return 'no edit';
}
