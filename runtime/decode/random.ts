// Seeded random streams for sampling: SplitMix64 (Steele, Lea & Flood 2014), one stream per (seed, sentence index).
const MASK = (1n << 64n) - 1n;
/** SplitMix64's increment: 2^64 / the golden ratio, odd. */
const GAMMA = 0x9e3779b97f4a7c15n;

/** SplitMix64's output function (Stafford's Mix13 variant): a bijection of 64-bit words that spreads every input bit. */
export function mix64(z: bigint): bigint {
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
  return z ^ (z >> 31n);
}

/**
 * The uniform numbers one sentence draws when it samples. The stream starts at state mix64(mix64(seed) ^ mix64(index +
 * GAMMA)) (so nearby seeds and indices start far apart) and is SplitMix64 from there: state += GAMMA, output
 * mix64(state), whose top 53 bits make a double in [0, 1). A stream depends on nothing but (seed, index): a sentence
 * draws the same numbers whatever else decodes beside it.
 */
export class RandomStream {
  private state: bigint;

  /** seed and index: integers in [0, 2^53). */
  constructor(
    readonly seed: number,
    readonly index: number,
  ) {
    this.state = mix64(mix64(BigInt(seed)) ^ mix64((BigInt(index) + GAMMA) & MASK));
  }

  /** The next number, uniform in [0, 1) with 53 random bits. */
  next(): number {
    this.state = (this.state + GAMMA) & MASK;
    return Number(mix64(this.state) >> 11n) / 2 ** 53;
  }
}
