// A quick kernel check for test/isa-cap.test.ts, run in a child process under a PLANC_ISA cap: every qmatmul variant
// the addon lists as runnable against the int8 reference (bit for bit), matmul and log-softmax (a hot loop) on auto
// against float64. Prints one JSON line: nativeInfo()'s isa, simd and variants, the checks made and the failures.
import { call } from '../../compiler/kernel-schema.ts';
import { qmatmulRef, quantizeChannels } from '../../compiler/quant/pack.ts';
import { callProgram, type Typed } from '../reference/call-program.ts';
import { nativeInfo } from '../../runtime/native.ts';

const info = nativeInfo();
const failures: string[] = [];
let checks = 0;
const fr = Math.fround;

function values(n: number, seed: number, scale: number): Float32Array {
  let s = (seed * 2654435761) % 4294967296 || 1;
  return Float32Array.from({ length: n }, () => {
    s = (s * 1664525 + 1013904223) % 4294967296;
    return fr(((s / 4294967296) * 2 - 1) * scale);
  });
}

function run(call: Parameters<typeof callProgram>[0][number]): Typed[] {
  const prog = callProgram([call]);
  try {
    return prog.run();
  } finally {
    prog.free();
  }
}

// qmatmul, int8 inputs: every variant listed, rows 1 and 17 (few rows and row tiles), K 513 (several k-tiles plus a tail)
for (const [m, k, n] of [
  [1, 513, 50],
  [17, 513, 50],
] as const) {
  const a = values(m * k, m + k, 2),
    w = values(k * n, k * n + 1, 0.5);
  const pk = quantizeChannels(w, k, n, 8);
  const want = qmatmulRef({ a, m, k, n, input: 'int8', w: pk.q, scale: pk.scale });
  for (const variant of info.variants.qmatmul ?? []) {
    const [y] = run({
      call: call('qmatmul', { activation: 'none', input: 'int8', n, k }),
      variant,
      ins: [
        { role: 'feed', dtype: 'float32', dims: [m, k], data: a },
        { role: 'weight', dtype: 'int8', dims: pk.dims, data: pk.q },
        { role: 'weight', dtype: 'float32', dims: [n], data: pk.scale },
        { role: 'weight', dtype: 'int32', dims: [n], data: pk.sum },
        null,
        null,
      ],
      outs: [{ role: 'out', dtype: 'float32', dims: [m, n], data: new Float32Array(m * n) }],
    }) as [Float32Array];
    checks++;
    const bad = y.findIndex((v, i) => !Object.is(v, want[i]));
    if (bad >= 0) failures.push(`qmatmul ${variant} M${m} K${k} N${n} [${bad}]: ${y[bad]} vs ${want[bad]}`);
  }
}

// matmul on auto (GEMV at one row, the blocked / BLAS / AVX-512 GEMM at 40)
for (const m of [1, 40]) {
  const k = 70,
    n = 90;
  const a = values(m * k, 5 + m, 1),
    b = values(k * n, 6, 1);
  const [y] = run({
    call: call('matmul'),
    variant: 'auto',
    ins: [
      { role: 'feed', dtype: 'float32', dims: [m, k], data: a },
      { role: 'weight', dtype: 'float32', dims: [k, n], data: b },
    ],
    outs: [{ role: 'out', dtype: 'float32', dims: [m, n], data: new Float32Array(m * n) }],
  }) as [Float32Array];
  checks++;
  for (let i = 0; i < m && failures.length < 20; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += a[i * k + p]! * b[p * n + j]!;
      if (Math.abs(y[i * n + j]! - s) > 1e-4 * (1 + Math.abs(s))) {
        failures.push(`matmul M${m} [${i}, ${j}]: ${y[i * n + j]} vs ${s}`);
        break;
      }
    }
  }
}

// log-softmax over rows of 1,000 (the hot loops' vector copies)
{
  const rows = 3,
    w = 1000;
  const x = values(rows * w, 9, 20);
  const [y] = run({
    call: call('softmax', { axis: -1, log: 1 }),
    variant: '',
    ins: [{ role: 'feed', dtype: 'float32', dims: [rows, w], data: x }],
    outs: [{ role: 'out', dtype: 'float32', dims: [rows, w], data: new Float32Array(rows * w) }],
  }) as [Float32Array];
  checks++;
  for (let r = 0; r < rows; r++) {
    const row = Array.from(x.subarray(r * w, (r + 1) * w));
    const mx = Math.max(...row),
      lse = mx + Math.log(row.reduce((s, v) => s + Math.exp(v - mx), 0));
    const bad = row.findIndex((v, j) => Math.abs(y[r * w + j]! - (v - lse)) > 1e-5 * (1 + Math.abs(v - lse)));
    if (bad >= 0) failures.push(`log-softmax row ${r} [${bad}]: ${y[r * w + bad]} vs ${row[bad]! - lse}`);
  }
}

process.stdout.write(
  `${JSON.stringify({ isa: info.isa, simd: info.simd, variants: info.variants, variantsUnavailable: info.variantsUnavailable, checks, failures })}\n`,
);
