// A small deterministic random number generator (SplitMix32 seeding a xoshiro128**), for reproducible k-means.

export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
}

/** A generator whose whole sequence is fixed by `seed` (any integer). */
export function seededRng(seed: number): Rng {
  const s = new Uint32Array(4);
  let z = seed >>> 0;
  for (let i = 0; i < 4; i++) {
    z = (z + 0x9e3779b9) >>> 0;
    let t = z;
    t = Math.imul(t ^ (t >>> 16), 0x85ebca6b);
    t = Math.imul(t ^ (t >>> 13), 0xc2b2ae35);
    s[i] = (t ^ (t >>> 16)) >>> 0;
  }
  const nextU32 = (): number => {
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  };
  const next = (): number => ((nextU32() >>> 5) * 67108864 + (nextU32() >>> 6)) / 9007199254740992;
  return { next, int: (n) => Math.floor(next() * n) };
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
