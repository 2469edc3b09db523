// Conversions between float32 values and the bit patterns of float16 and bfloat16 (round to nearest even).
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float16 bits → value. */
export function f16BitsToNumber(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** value → float16 bits, rounding to nearest even, overflow to infinity. */
export function numberToF16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  const man = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    const full = man | 0x800000;
    const shift = 14 - e;
    let r = full >>> shift;
    const rem = full & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && r & 1)) r++;
    return sign | r;
  }
  let r = (e << 10) | (man >>> 13);
  const rem = man & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && r & 1)) r++;
  return sign | r;
}

/** bfloat16 bits → value. */
export function bf16BitsToNumber(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0]!;
}

/** value → bfloat16 bits, rounding to nearest even; NaN stays NaN. */
export function numberToBf16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  if (Number.isNaN(x)) return 0x7fc0;
  const lsb = (b >>> 16) & 1;
  return ((b + 0x7fff + lsb) >>> 16) & 0xffff;
}

export function roundF16(x: number): number {
  return f16BitsToNumber(numberToF16Bits(x));
}
export function roundBf16(x: number): number {
  return bf16BitsToNumber(numberToBf16Bits(x));
}
