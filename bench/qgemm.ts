// `npm run bench -- qgemm`: the quantized kernels (qmatmul int8 / w8 / int16, qproject_topk) against their float32
// counterparts (fused_matmul, project_topk), all variant auto, on es-en-like shapes at M = 1 and 32; then the int8
// products on the variants that compete for auto's first place (avx512vnni, amx) where this machine runs them, M = 1
// to 128 (`variants` of the record); appends to bench/results/qgemm.jsonl. Each timed program runs C calls of one kernel: over C distinct weight copies ("cold", at
// least 64 MiB of weights in all, so they stream from memory as a decoder step's do) or C times over one ("hot"); at one
// native thread and at all of them (PLANC_BENCH_THREADS=n: only n). Medians; the fastest run is kept too (minUs), as
// a shared machine's other load inflates medians of multi-threaded runs.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../compiler/paths.ts';
import { call } from '../compiler/kernel-schema.ts';
import { quantizeChannels, quantizeRows } from '../compiler/quant/pack.ts';
import { nativeInfo, setThreads } from '../runtime/native.ts';
import { machineFacts } from './machine.ts';
import { callProgram, type Call, type Operand } from '../test/reference/call-program.ts';

const COLD_BYTES = 64 * 2 ** 20;
const MAX_CALLS = 256;
const HOT_CALLS = 32;

interface Row {
  kernel: string;
  shape: string;
  m: number;
  threads: number;
  weightBytes: number;
  mode: 'hot' | 'cold';
  fp32Us: number;
  quantUs: number;
  ratio: number;
  fp32GBs: number;
  quantGBs: number;
  fp32MinUs: number;
  quantMinUs: number;
}

/** Median and fastest time of one call, in microseconds. */
interface Timing {
  med: number;
  min: number;
}

function values(n: number, seed: number, scale: number): Float32Array {
  let s = seed;
  return Float32Array.from({ length: n }, () => {
    s = (s * 1664525 + 1013904223) % 4294967296;
    return ((s / 4294967296) * 2 - 1) * scale;
  });
}

/** The time of one call over `rounds` runs of a program of calls (each run: calls.length calls). */
function timeCalls(calls: Call[], rounds: number): Timing {
  const prog = callProgram(calls);
  try {
    for (let i = 0; i < 3; i++) prog.run();
    const t: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const t0 = process.hrtime.bigint();
      prog.run();
      t.push(Number(process.hrtime.bigint() - t0) / 1e3 / calls.length);
    }
    t.sort((a, b) => a - b);
    return { med: t[Math.floor(t.length / 2)]!, min: t[0]! };
  } finally {
    prog.free();
  }
}

/** How many calls a mode runs for weights of `bytes`: hot a fixed count, cold enough distinct copies for COLD_BYTES. */
const callsFor = (mode: 'hot' | 'cold', bytes: number) =>
  mode === 'hot' ? HOT_CALLS : Math.min(MAX_CALLS, Math.max(4, Math.ceil(COLD_BYTES / bytes)));

const out = (dims: number[], data = new Float32Array(dims.reduce((a, b) => a * b, 1))): Operand => ({
  role: 'out',
  dtype: 'float32',
  dims,
  data,
});
const weight = (dtype: Operand['dtype'], dims: number[], data: Operand['data']): Operand => ({
  role: 'weight',
  dtype,
  dims,
  data,
});
/** A fresh weight operand over the same data: a distinct weight of the plan (another copy in the blob). */
const copyOf = (o: Operand): Operand => ({ ...o });

/** A row comparing two timings of kernels reading fp32Bytes and quantBytes of weights per call. */
function row(
  kernel: string,
  shape: string,
  m: number,
  threads: number,
  mode: 'hot' | 'cold',
  fp32: Timing,
  quant: Timing,
  fp32Bytes: number,
  quantBytes: number,
): Row {
  return {
    kernel,
    shape,
    m,
    threads,
    weightBytes: quantBytes,
    mode,
    fp32Us: fp32.med,
    quantUs: quant.med,
    ratio: fp32.med / quant.med,
    fp32GBs: fp32Bytes / fp32.med / 1e3,
    quantGBs: quantBytes / quant.med / 1e3,
    fp32MinUs: fp32.min,
    quantMinUs: quant.min,
  };
}

function matmulRows(k: number, n: number, m: number, threads: number, mode: 'hot' | 'cold', rounds: number): Row[] {
  const a: Operand = { role: 'feed', dtype: 'float32', dims: [m, k], data: values(m * k, 1, 1) };
  const wf = values(k * n, 2, 0.1);
  const w32 = weight('float32', [k, n], wf);
  const rows: Row[] = [];
  const fp32Calls = callsFor(mode, wf.byteLength);
  const fp32: Call[] = Array.from({ length: fp32Calls }, () => {
    const w = mode === 'cold' ? copyOf(w32) : w32;
    return {
      call: call('fused_matmul', { activation: 'none' }),
      variant: 'auto',
      ins: [a, w, null, null],
      outs: [out([m, n])],
    };
  });
  const fp32T = timeCalls(fp32, rounds);
  for (const [label, input, bits] of [
    ['int8', 'int8', 8],
    ['w8 (float32 rows)', 'float32', 8],
    ['int16', 'int16', 16],
  ] as const) {
    const q = quantizeChannels(wf, k, n, bits);
    const wq = weight(bits === 8 ? 'int8' : 'int16', q.dims, q.q),
      sc = weight('float32', [n], q.scale),
      sum = weight('int32', [n], q.sum);
    const calls: Call[] = Array.from({ length: callsFor(mode, q.q.byteLength) }, () => {
      const w = mode === 'cold' ? copyOf(wq) : wq;
      return {
        call: call('qmatmul', { activation: 'none', input, n, k }),
        variant: 'auto',
        ins: [a, w, sc, sum, null, null],
        outs: [out([m, n])],
      };
    });
    rows.push(
      row(
        `qmatmul ${label}`,
        `K=${k} N=${n}`,
        m,
        threads,
        mode,
        fp32T,
        timeCalls(calls, rounds),
        wf.byteLength,
        q.q.byteLength,
      ),
    );
  }
  return rows;
}

function projectRows(v: number, d: number, m: number, threads: number, rounds: number): Row[] {
  const k = 8;
  const x: Operand = { role: 'feed', dtype: 'float32', dims: [m, d], data: values(m * d, 3, 1) };
  const wf = values(v * d, 4, 0.1); // [V, D]: the embedding a tied output projection reads
  const topkOuts = () => [
    out([m, k]),
    { role: 'out', dtype: 'int64', dims: [m, k], data: new BigInt64Array(m * k) } as Operand,
  ];
  const calls = (c: Omit<Call, 'outs'>) => Array.from({ length: 4 }, () => ({ ...c, outs: topkOuts() }));
  const fp32T = timeCalls(
    calls({
      call: call('project_topk', { k, transposed: 1 }),
      variant: '',
      ins: [x, weight('float32', [v, d], wf), null, null],
    }),
    rounds,
  );
  const q = quantizeRows(wf, v, d);
  const rows: Row[] = [];
  for (const [label, input] of [
    ['int8', 'int8'],
    ['w8 (float32 rows)', 'float32'],
  ] as const) {
    const quant = timeCalls(
      calls({
        call: call('qproject_topk', { k, input, d }),
        variant: 'auto',
        ins: [x, weight('int8', q.dims, q.q), weight('float32', [v], q.scale), weight('int32', [v], q.sum), null, null],
      }),
      rounds,
    );
    rows.push(
      row(`qproject_topk ${label}`, `V=${v} D=${d}`, m, threads, 'cold', fp32T, quant, wf.byteLength, q.q.byteLength),
    );
  }
  return rows;
}

/** One int8 product timed on each compared variant this machine runs (hot: the same weights each call). */
interface VariantRow {
  kernel: string;
  shape: string;
  m: number;
  threads: number;
  us: Record<string, number>;
  minUs: Record<string, number>;
}

/** The variants compared for auto's first place. */
const COMPARED = ['avx512vnni', 'amx'] as const;

/** The timing of `calls` (built for a variant), or null where nativeInfo().variants says this machine does not run it. */
function timeVariant(calls: Call[], rounds: number): Timing | null {
  const runs = nativeInfo().variants;
  if (calls.some((c) => runs[c.call.kernel] !== undefined && !runs[c.call.kernel]!.includes(c.variant))) return null;
  return timeCalls(calls, rounds);
}

function variantRow(
  kernel: string,
  shape: string,
  m: number,
  threads: number,
  build: (variant: string) => Call[],
  rounds: number,
): VariantRow {
  const r: VariantRow = { kernel, shape, m, threads, us: {}, minUs: {} };
  for (const v of COMPARED) {
    const t = timeVariant(build(v), rounds);
    if (t) {
      r.us[v] = t.med;
      r.minUs[v] = t.min;
    }
  }
  return r;
}

function variantRows(threads: number): VariantRow[] {
  const rows: VariantRow[] = [];
  for (const [k, n] of [
    [512, 2048],
    [2048, 512],
    [512, 512],
    [256, 1024],
    [1024, 256],
    [256, 256],
  ] as const) {
    const q = quantizeChannels(values(k * n, 2, 0.1), k, n, 8);
    const wq = weight('int8', q.dims, q.q),
      sc = weight('float32', [n], q.scale),
      sum = weight('int32', [n], q.sum);
    for (const m of [1, 8, 16, 32, 128]) {
      const a: Operand = { role: 'feed', dtype: 'float32', dims: [m, k], data: values(m * k, 1, 1) };
      rows.push(
        variantRow(
          'qmatmul int8',
          `K=${k} N=${n}`,
          m,
          threads,
          (variant) =>
            Array.from({ length: HOT_CALLS }, () => ({
              call: call('qmatmul', { activation: 'none', input: 'int8', n, k }),
              variant,
              ins: [a, wq, sc, sum, null, null],
              outs: [out([m, n])],
            })),
          m <= 16 ? 31 : 11,
        ),
      );
    }
  }
  for (const [v, d] of [
    [58101, 512],
    [32000, 256],
  ] as const) {
    const q = quantizeRows(values(v * d, 4, 0.1), v, d);
    const ins = (x: Operand): (Operand | null)[] => [
      x,
      weight('int8', q.dims, q.q),
      weight('float32', [v], q.scale),
      weight('int32', [v], q.sum),
      null,
      null,
    ];
    for (const m of [1, 8, 32]) {
      const x: Operand = { role: 'feed', dtype: 'float32', dims: [m, d], data: values(m * d, 3, 1) };
      const outs = () => [
        out([m, 8]),
        { role: 'out', dtype: 'int64', dims: [m, 8], data: new BigInt64Array(m * 8) } as Operand,
      ];
      rows.push(
        variantRow(
          'qproject_topk int8',
          `V=${v} D=${d}`,
          m,
          threads,
          (variant) =>
            Array.from({ length: 4 }, () => ({
              call: call('qproject_topk', { k: 8, input: 'int8', d }),
              variant,
              ins: ins(x),
              outs: outs(),
            })),
          m === 1 ? 15 : 5,
        ),
      );
    }
  }
  return rows;
}

export async function benchQgemm(): Promise<void> {
  const rows: Row[] = [];
  const print = (r: Row) =>
    console.log(
      `${r.kernel.padEnd(31)} ${r.shape.padEnd(14)} M=${String(r.m).padEnd(3)} t=${r.threads} ${r.mode.padEnd(4)} ` +
        `fp32 ${r.fp32Us.toFixed(1).padStart(8)} us  quant ${r.quantUs.toFixed(1).padStart(8)} us  ${r.ratio.toFixed(2).padStart(5)}x` +
        ` (min ${(r.fp32MinUs / r.quantMinUs).toFixed(2)}x)` +
        (r.m === 1 ? `  weights fp32 ${r.fp32GBs.toFixed(1)} GB/s, quant ${r.quantGBs.toFixed(1)} GB/s` : ''),
    );
  const info = nativeInfo();
  const all = info.threads;
  const only = Number(process.env.PLANC_BENCH_THREADS) || 0;
  for (const threads of only ? [only] : [...new Set([1, all])]) {
    setThreads(threads);
    // The brief's opus-mt shapes (d 512, ffn 2048), then es-en's own (d 256, ffn 1024, vocabulary 32000).
    for (const [k, n] of [
      [512, 2048],
      [2048, 512],
      [512, 512],
      [256, 1024],
      [1024, 256],
      [256, 256],
    ] as const) {
      for (const m of [1, 32]) {
        for (const mode of ['cold', 'hot'] as const) {
          for (const r of matmulRows(k, n, m, threads, mode, m === 1 ? 31 : 11)) {
            rows.push(r);
            print(r);
          }
        }
      }
    }
    for (const [v, d] of [
      [58101, 512],
      [32000, 256],
    ] as const) {
      for (const m of [1, 32])
        for (const r of projectRows(v, d, m, threads, m === 1 ? 15 : 5)) {
          rows.push(r);
          print(r);
        }
    }
  }
  const variants: VariantRow[] = [];
  for (const threads of only ? [only] : [...new Set([1, all])]) {
    setThreads(threads);
    for (const r of variantRows(threads)) {
      variants.push(r);
      const [a, b] = COMPARED.map((v) => r.us[v]);
      console.log(
        `${r.kernel.padEnd(31)} ${r.shape.padEnd(14)} M=${String(r.m).padEnd(3)} t=${r.threads} hot  ` +
          COMPARED.map((v) => `${v} ${r.us[v] === undefined ? '(not here)' : `${r.us[v]!.toFixed(1)} us`}`).join('  ') +
          (a !== undefined && b !== undefined
            ? `  ${COMPARED[1]} ${(a / b).toFixed(2)}x (min ${(r.minUs[COMPARED[0]]! / r.minUs[COMPARED[1]]!).toFixed(2)}x)`
            : ''),
      );
    }
  }
  setThreads(all);
  const runs = COMPARED.filter((v) => variants.some((r) => r.us[v] !== undefined));
  const result = { bench: 'qgemm', machine: machineFacts({ native: info, qgemmVariants: runs }), rows, variants };
  const file = path.join(REPO_ROOT, 'bench', 'results', 'qgemm.jsonl');
  fs.appendFileSync(file, JSON.stringify(result) + '\n');
  console.log(`appended to ${path.relative(REPO_ROOT, file)}`);
}
