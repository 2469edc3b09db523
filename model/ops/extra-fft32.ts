// A float32 complex FFT that follows pocketfft's radix-2/3/4/5 passes op by op, so DFT rounding matches numpy's complex64 FFT.
const f = Math.fround;

/** Complex array as separate real/imaginary float32 parts. */
interface CArr {
  r: Float64Array;
  i: Float64Array;
}

function carr(n: number): CArr {
  return { r: new Float64Array(n), i: new Float64Array(n) };
}

/** pocketfft's factor order: 4s first, then one 2 (moved to the front), then odd factors. Undefined when a factor needs another pass. */
function factorize(n: number): number[] | undefined {
  const fact: number[] = [];
  let len = n;
  if (len % 8 === 0) return undefined; // pass8 is not emulated
  while (len % 4 === 0) {
    fact.push(4);
    len /= 4;
  }
  if (len % 2 === 0) {
    len /= 2;
    fact.push(2);
    [fact[0], fact[fact.length - 1]] = [fact[fact.length - 1]!, fact[0]!];
  }
  for (let d = 3; d * d <= len; d += 2)
    while (len % d === 0) {
      fact.push(d);
      len /= d;
    }
  if (len > 1) fact.push(len);
  return fact.every((x) => x === 2 || x === 3 || x === 4 || x === 5) ? fact : undefined;
}

/** v * w (backward) or v * conj(w) (forward), rounded like float32 code. */
function smul(fwd: boolean, vr: number, vi: number, wr: number, wi: number, out: CArr, o: number): void {
  if (fwd) {
    out.r[o] = f(f(vr * wr) + f(vi * wi));
    out.i[o] = f(f(vi * wr) - f(vr * wi));
  } else {
    out.r[o] = f(f(vr * wr) - f(vi * wi));
    out.i[o] = f(f(vr * wi) + f(vi * wr));
  }
}

interface Pass {
  ido: number;
  l1: number;
  cc: CArr;
  ch: CArr;
  twr: Float64Array;
  twi: Float64Array;
  fwd: boolean;
}

function pass2(p: Pass): void {
  const { ido, l1, cc, ch, twr, twi, fwd } = p;
  const CC = (a: number, b: number, c: number) => a + ido * (b + 2 * c);
  const CH = (a: number, b: number, c: number) => a + ido * (b + l1 * c);
  for (let k = 0; k < l1; k++) {
    for (let i = 0; i < ido; i++) {
      const a = CC(i, 0, k),
        b = CC(i, 1, k);
      ch.r[CH(i, k, 0)] = f(cc.r[a]! + cc.r[b]!);
      ch.i[CH(i, k, 0)] = f(cc.i[a]! + cc.i[b]!);
      const dr = f(cc.r[a]! - cc.r[b]!),
        di = f(cc.i[a]! - cc.i[b]!);
      if (i === 0) {
        ch.r[CH(i, k, 1)] = dr;
        ch.i[CH(i, k, 1)] = di;
      } else smul(fwd, dr, di, twr[i - 1]!, twi[i - 1]!, ch, CH(i, k, 1));
    }
  }
}

function pass3(p: Pass): void {
  const { ido, l1, cc, ch, twr, twi, fwd } = p;
  const tw1r = -0.5,
    tw1i = f((fwd ? -1 : 1) * 0.8660254037844386);
  const CC = (a: number, b: number, c: number) => a + ido * (b + 3 * c);
  const CH = (a: number, b: number, c: number) => a + ido * (b + l1 * c);
  const W = (x: number, i: number) => i - 1 + x * (ido - 1);
  for (let k = 0; k < l1; k++) {
    for (let i = 0; i < ido; i++) {
      const t0r = cc.r[CC(i, 0, k)]!,
        t0i = cc.i[CC(i, 0, k)]!;
      const t1r = f(cc.r[CC(i, 1, k)]! + cc.r[CC(i, 2, k)]!),
        t1i = f(cc.i[CC(i, 1, k)]! + cc.i[CC(i, 2, k)]!);
      const t2r = f(cc.r[CC(i, 1, k)]! - cc.r[CC(i, 2, k)]!),
        t2i = f(cc.i[CC(i, 1, k)]! - cc.i[CC(i, 2, k)]!);
      ch.r[CH(i, k, 0)] = f(t0r + t1r);
      ch.i[CH(i, k, 0)] = f(t0i + t1i);
      const car = f(t0r + f(t1r * tw1r)),
        cai = f(t0i + f(t1i * tw1r));
      const cbr = -f(t2i * tw1i),
        cbi = f(t2r * tw1i);
      store(fwd, i, car, cai, cbr, cbi, ch, CH(i, k, 1), CH(i, k, 2), twr, twi, W(0, i), W(1, i));
    }
  }
}

/** PM(u1, u2, ca, cb), with the twiddles applied when i > 0. */
function store(
  fwd: boolean,
  i: number,
  car: number,
  cai: number,
  cbr: number,
  cbi: number,
  ch: CArr,
  o1: number,
  o2: number,
  twr: Float64Array,
  twi: Float64Array,
  w1: number,
  w2: number,
): void {
  const sr = f(car + cbr),
    si = f(cai + cbi),
    dr = f(car - cbr),
    di = f(cai - cbi);
  if (i === 0) {
    ch.r[o1] = sr;
    ch.i[o1] = si;
    ch.r[o2] = dr;
    ch.i[o2] = di;
  } else {
    smul(fwd, sr, si, twr[w1]!, twi[w1]!, ch, o1);
    smul(fwd, dr, di, twr[w2]!, twi[w2]!, ch, o2);
  }
}

function pass4(p: Pass): void {
  const { ido, l1, cc, ch, twr, twi, fwd } = p;
  const CC = (a: number, b: number, c: number) => a + ido * (b + 4 * c);
  const CH = (a: number, b: number, c: number) => a + ido * (b + l1 * c);
  const W = (x: number, i: number) => i - 1 + x * (ido - 1);
  for (let k = 0; k < l1; k++) {
    for (let i = 0; i < ido; i++) {
      const c0 = CC(i, 0, k),
        c1 = CC(i, 1, k),
        c2 = CC(i, 2, k),
        c3 = CC(i, 3, k);
      const t2r = f(cc.r[c0]! + cc.r[c2]!),
        t2i = f(cc.i[c0]! + cc.i[c2]!);
      const t1r = f(cc.r[c0]! - cc.r[c2]!),
        t1i = f(cc.i[c0]! - cc.i[c2]!);
      const t3r = f(cc.r[c1]! + cc.r[c3]!),
        t3i = f(cc.i[c1]! + cc.i[c3]!);
      let t4r = f(cc.r[c1]! - cc.r[c3]!),
        t4i = f(cc.i[c1]! - cc.i[c3]!);
      // ROTX90: forward multiplies by -i, backward by +i
      if (fwd) [t4r, t4i] = [t4i, -t4r];
      else [t4r, t4i] = [-t4i, t4r];
      const o = [CH(i, k, 0), CH(i, k, 1), CH(i, k, 2), CH(i, k, 3)] as const;
      const vals: [number, number][] = [
        [f(t2r + t3r), f(t2i + t3i)],
        [f(t1r + t4r), f(t1i + t4i)],
        [f(t2r - t3r), f(t2i - t3i)],
        [f(t1r - t4r), f(t1i - t4i)],
      ];
      for (let u = 0; u < 4; u++) {
        const [vr, vi] = vals[u]!;
        if (i === 0 || u === 0) {
          ch.r[o[u]] = vr;
          ch.i[o[u]] = vi;
        } else smul(fwd, vr, vi, twr[W(u - 1, i)]!, twi[W(u - 1, i)]!, ch, o[u]);
      }
    }
  }
}

function pass5(p: Pass): void {
  const { ido, l1, cc, ch, twr, twi, fwd } = p;
  const s = fwd ? -1 : 1;
  const tw1r = f(0.3090169943749474),
    tw1i = f(s * 0.9510565162951535);
  const tw2r = f(-0.8090169943749474),
    tw2i = f(s * 0.5877852522924731);
  const CC = (a: number, b: number, c: number) => a + ido * (b + 5 * c);
  const CH = (a: number, b: number, c: number) => a + ido * (b + l1 * c);
  const W = (x: number, i: number) => i - 1 + x * (ido - 1);
  for (let k = 0; k < l1; k++) {
    for (let i = 0; i < ido; i++) {
      const g = (j: number): [number, number] => [cc.r[CC(i, j, k)]!, cc.i[CC(i, j, k)]!];
      const [t0r, t0i] = g(0);
      const [a1r, a1i] = g(1),
        [a4r, a4i] = g(4),
        [a2r, a2i] = g(2),
        [a3r, a3i] = g(3);
      const t1r = f(a1r + a4r),
        t1i = f(a1i + a4i),
        t4r = f(a1r - a4r),
        t4i = f(a1i - a4i);
      const t2r = f(a2r + a3r),
        t2i = f(a2i + a3i),
        t3r = f(a2r - a3r),
        t3i = f(a2i - a3i);
      ch.r[CH(i, k, 0)] = f(f(t0r + t1r) + t2r);
      ch.i[CH(i, k, 0)] = f(f(t0i + t1i) + t2i);
      const step = (u1: number, u2: number, twar: number, twbr: number, twai: number, twbi: number) => {
        const car = f(f(t0r + f(twar * t1r)) + f(twbr * t2r));
        const cai = f(f(t0i + f(twar * t1i)) + f(twbr * t2i));
        const cbi = f(f(twai * t4r) + f(twbi * t3r));
        const cbr = -f(f(twai * t4i) + f(twbi * t3i));
        store(fwd, i, car, cai, cbr, cbi, ch, CH(i, k, u1), CH(i, k, u2), twr, twi, W(u1 - 1, i), W(u2 - 1, i));
      };
      step(1, 4, tw1r, tw2r, tw1i, tw2i);
      step(2, 3, tw2r, tw1r, tw2i, -tw1i);
    }
  }
}

const PASSES: Record<number, (p: Pass) => void> = { 2: pass2, 3: pass3, 4: pass4, 5: pass5 };

/**
 * The n-point complex FFT of (re, im) (zero-padded / truncated to n) in float32 arithmetic, scaled by fct, or
 * undefined when n has a factor outside 2, 3, 4, 5 (or 8 | n) and the caller should compute in doubles.
 */
export function fft32(
  re: ArrayLike<number>,
  im: ArrayLike<number>,
  n: number,
  fwd: boolean,
  fct: number,
): CArr | undefined {
  const fact = factorize(n);
  if (!fact || (n >= 50 && !smooth(n))) return undefined;
  let p1 = carr(n);
  let p2 = carr(n);
  for (let t = 0; t < Math.min(n, re.length); t++) {
    p1.r[t] = f(re[t]!);
    p1.i[t] = f(im[t]!);
  }
  const ff = f(fct);
  if (n === 1) {
    p1.r[0] = f(p1.r[0]! * ff);
    p1.i[0] = f(p1.i[0]! * ff);
    return p1;
  }
  let l1 = 1;
  for (const ip of fact) {
    const l2 = ip * l1;
    const ido = n / l2;
    const twr = new Float64Array((ip - 1) * (ido - 1));
    const twi = new Float64Array((ip - 1) * (ido - 1));
    for (let j = 1; j < ip; j++) {
      for (let i = 1; i < ido; i++) {
        const ang = (2 * Math.PI * ((j * l1 * i) % n)) / n;
        twr[(j - 1) * (ido - 1) + i - 1] = f(Math.cos(ang));
        twi[(j - 1) * (ido - 1) + i - 1] = f(Math.sin(ang));
      }
    }
    PASSES[ip]!({ ido, l1, cc: p1, ch: p2, twr, twi, fwd });
    [p1, p2] = [p2, p1];
    l1 = l2;
  }
  if (ff !== 1)
    for (let t = 0; t < n; t++) {
      p1.r[t] = f(p1.r[t]! * ff);
      p1.i[t] = f(p1.i[t]! * ff);
    }
  return p1;
}

/** pocketfft uses the plain passes when the largest prime factor squared is at most n (else Bluestein). */
function smooth(n: number): boolean {
  let len = n,
    largest = 1;
  for (let d = 2; d * d <= len; d++)
    while (len % d === 0) {
      largest = Math.max(largest, d);
      len /= d;
    }
  largest = Math.max(largest, len);
  return largest * largest <= n;
}
