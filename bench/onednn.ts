// `npm run bench -- onednn`: planc's int8 and float32 products against oneDNN's (Debian's libdnnl-dev, 2.6), to decide
// whether any es-en shape should go to oneDNN (issue 12), and the share of qmatmul's time spent quantizing A's rows
// (which fusing the quantizer into the producing layer_norm would save). Skips, saying why, where libdnnl-dev or cmake
// is missing: oneDNN is never a dependency of planc's addon or tests.
//
// Per thread count (1, 2) and run (PLANC_BENCH_RUNS, default 3; medians over runs, each run's median kept):
// - bench/onednn/onednn_bench (built here with cmake against libdnnl and planc's kernel library, native/test's
//   planc_kernels): oneDNN int8 matmul (s8 rows, and u8 rows with zero point 128; per-channel w scales as output scales,
//   the per-row activation scale as a pass over the output: oneDNN 2.6 has no per-row source scale and its [M, 1]
//   binary post-op falls back to the reference kernel), oneDNN float32 matmul, weights reordered once outside the
//   timing; planc's qmatmul (auto) and its row quantizer (qgemm::quantize_rows) alone, same process, same rows;
// - planc through its own executor (test/reference/call-program.ts, the harness of bench/qgemm.ts): qmatmul int8
//   (auto), fused_matmul float32 (auto), and qproject_topk k = 4 for the vocabulary shape; A is a plan weight and a
//   tiny call ends each program, so no run copies A in or a large Y out (those copies are not the kernels' time).
// All hot: one weight called again and again after a warm-up; the median per call (µs) of rounds of calls. Then the
// es-en int8 plan's quantizations of A (counted in ESEN) times the measured quantizer, against the products' time.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../compiler/paths.ts';
import { call } from '../compiler/kernel-schema.ts';
import { quantizeChannels, quantizeRows } from '../compiler/quant/pack.ts';
import { nativeInfo, setThreads } from '../runtime/native.ts';
import { machineFacts } from './machine.ts';
import { callProgram, type Call, type Operand } from '../test/reference/call-program.ts';

/** es-en's products: d 256, ffn 1024, vocabulary 32000 (the last: the output projection). */
const SHAPES: [number, number][] = [
  [256, 256],
  [256, 1024],
  [1024, 256],
  [256, 32000],
];
const ROWS = [1, 8, 32, 256, 1024];
const VOCAB: [number, number] = [256, 32000];
const TOPK = 4;
const BUDGET_MS = 150;

const SRC = path.join(REPO_ROOT, 'bench', 'onednn');
const BUILD = path.join(SRC, 'build');
const BIN = path.join(BUILD, 'onednn_bench');

/** Why the oneDNN side cannot be built here, or null. */
function missing(): string | null {
  if (spawnSync('cmake', ['--version']).status !== 0) return 'cmake is not installed';
  const header = ['/usr/include', '/usr/local/include'].some((d) =>
    fs.existsSync(path.join(d, 'oneapi', 'dnnl', 'dnnl.hpp')),
  );
  if (!header) return 'libdnnl-dev is not installed (Debian: apt-get install libdnnl-dev)';
  return null;
}

/** Configures and builds onednn_bench: {} when built, { skip } when oneDNN's cmake package is not found; throws otherwise. */
function build(): { skip?: string } {
  const conf = spawnSync('cmake', ['-S', SRC, '-B', BUILD, '-DCMAKE_BUILD_TYPE=Release'], { encoding: 'utf8' });
  if (conf.status !== 0) {
    const text = `${conf.stdout}\n${conf.stderr}`;
    if (/dnnl/i.test(text) && /Could not find|not found/i.test(text))
      return { skip: "oneDNN's cmake package (libdnnl-dev) is not installed" };
    throw new Error(`bench onednn: cmake configure failed:\n${text}`);
  }
  const b = spawnSync('cmake', ['--build', BUILD, '--parallel', '2', '--target', 'onednn_bench'], { encoding: 'utf8' });
  if (b.status !== 0) throw new Error(`bench onednn: build failed:\n${b.stdout}\n${b.stderr}`);
  return {};
}

/** One measurement of one run: µs per call (median, fastest) and what else the measurer said. */
interface Sample {
  measure: string;
  m: number;
  k: number;
  n: number;
  threads: number;
  us: number;
  minUs: number;
  [extra: string]: unknown;
}

function runNative(threads: number): { info: Record<string, unknown>; samples: Sample[] } {
  const args = [
    '--threads',
    String(threads),
    '--rows',
    ROWS.join(','),
    '--shapes',
    SHAPES.map(([k, n]) => `${k}:${n}`).join(','),
    '--budget-ms',
    String(BUDGET_MS),
  ];
  // oneDNN's threads are OpenMP's: OMP_NUM_THREADS, read when libgomp loads.
  const r = spawnSync(BIN, args, {
    encoding: 'utf8',
    env: { ...process.env, OMP_NUM_THREADS: String(threads) },
    maxBuffer: 64 * 2 ** 20,
  });
  if (r.status !== 0) throw new Error(`bench onednn: ${BIN} failed (${r.status ?? r.signal}):\n${r.stderr}`);
  let info: Record<string, unknown> = {};
  const samples: Sample[] = [];
  for (const line of r.stdout.split('\n')) {
    if (!line.trim()) continue;
    const o = JSON.parse(line) as Record<string, unknown>;
    if (o.info) info = o;
    else if (o.error) throw new Error(`bench onednn: ${String(o.measure)} M=${String(o.m)}: ${String(o.error)}`);
    else samples.push(o as Sample);
  }
  return { info, samples };
}

// ---------- planc through its executor (the bench/qgemm.ts harness: callProgram) ----------

function values(n: number, seed: number, scale: number): Float32Array {
  let s = seed;
  return Float32Array.from({ length: n }, () => {
    s = (s * 1664525 + 1013904223) % 4294967296;
    return ((s / 4294967296) * 2 - 1) * scale;
  });
}

const out = (dims: number[]): Operand => ({
  role: 'out',
  dtype: 'float32',
  dims,
  data: new Float32Array(dims.reduce((a, b) => a * b, 1)),
});
const weight = (dtype: Operand['dtype'], dims: number[], data: Operand['data']): Operand => ({
  role: 'weight',
  dtype,
  dims,
  data,
});

/**
 * A tiny last call of every timed program: a program run copies its last call's outputs back to JS, so the timed calls
 * are never last (else a [1024, 32000] output would add a 131 MB copy to each run). It costs well under 0.1 µs.
 */
const SINK: Call = (() => {
  const q = quantizeChannels(values(16 * 16, 5, 0.1), 16, 16, 8);
  return {
    call: call('qmatmul', { activation: 'none', input: 'int8', n: 16, k: 16 }),
    variant: 'auto',
    ins: [
      weight('float32', [1, 16], values(16, 6, 1)),
      weight('int8', q.dims, q.q),
      weight('float32', [16], q.scale),
      weight('int32', [16], q.sum),
      null,
      null,
    ],
    outs: [out([1, 16])],
  };
})();

/**
 * Median and fastest µs of one call: programs of C calls of `make()` (C for about 2 ms a run) and SINK, about
 * BUDGET_MS in all. Callers give A as a weight, not a feed, so no run copies it into the arena.
 */
function timeHot(make: () => Call): { us: number; minUs: number } {
  const probe = callProgram([make(), SINK]);
  let one: number;
  try {
    for (let i = 0; i < 3; i++) probe.run();
    const t0 = process.hrtime.bigint();
    probe.run();
    one = Math.max(0.05, Number(process.hrtime.bigint() - t0) / 1e3);
  } finally {
    probe.free();
  }
  const calls = Math.min(256, Math.max(1, Math.ceil(2000 / one)));
  const rounds = Math.min(101, Math.max(7, Math.floor((BUDGET_MS * 1000) / (one * calls))));
  const prog = callProgram([...Array.from({ length: calls }, make), SINK]);
  try {
    for (let i = 0; i < 2; i++) prog.run();
    const t: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const t0 = process.hrtime.bigint();
      prog.run();
      t.push(Number(process.hrtime.bigint() - t0) / 1e3 / calls);
    }
    t.sort((a, b) => a - b);
    return { us: t[Math.floor(t.length / 2)]!, minUs: t[0]! };
  } finally {
    prog.free();
  }
}

function runPlanc(threads: number): Sample[] {
  setThreads(threads);
  const samples: Sample[] = [];
  const add = (measure: string, m: number, k: number, n: number, t: { us: number; minUs: number }) =>
    samples.push({ measure, m, k, n, threads, ...t });
  for (const [k, n] of SHAPES) {
    const wf = values(k * n, 2, 0.1);
    const w32 = weight('float32', [k, n], wf);
    const q = quantizeChannels(wf, k, n, 8);
    const wq = weight('int8', q.dims, q.q),
      sc = weight('float32', [n], q.scale),
      sum = weight('int32', [n], q.sum);
    for (const m of ROWS) {
      const a = weight('float32', [m, k], values(m * k, 1, 1));
      add(
        'planc-exec-qmatmul',
        m,
        k,
        n,
        timeHot(() => ({
          call: call('qmatmul', { activation: 'none', input: 'int8', n, k }),
          variant: 'auto',
          ins: [a, wq, sc, sum, null, null],
          outs: [out([m, n])],
        })),
      );
      add(
        'planc-exec-f32',
        m,
        k,
        n,
        timeHot(() => ({
          call: call('fused_matmul', { activation: 'none' }),
          variant: 'auto',
          ins: [a, w32, null, null],
          outs: [out([m, n])],
        })),
      );
    }
  }
  const [d, v] = VOCAB;
  const qr = quantizeRows(values(v * d, 4, 0.1), v, d);
  const wr = weight('int8', qr.dims, qr.q),
    sr = weight('float32', [v], qr.scale),
    sumr = weight('int32', [v], qr.sum);
  for (const m of ROWS) {
    const x = weight('float32', [m, d], values(m * d, 3, 1));
    add(
      'planc-exec-qproject_topk',
      m,
      d,
      v,
      timeHot(() => ({
        call: call('qproject_topk', { k: TOPK, input: 'int8', d }),
        variant: 'auto',
        ins: [x, wr, sr, sumr, null, null],
        outs: [out([m, TOPK]), { role: 'out', dtype: 'int64', dims: [m, TOPK], data: new BigInt64Array(m * TOPK) }],
      })),
    );
  }
  return samples;
}

// ---------- aggregation and report ----------

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** A measurement over runs: the median of the runs' medians, each run's median, and the spread (max / min). */
interface Agg {
  us: number;
  runsUs: number[];
  spread: number;
  minUs: number;
  extra: Record<string, unknown>;
}

function aggregate(all: Sample[]): Map<string, Agg> {
  const groups = new Map<string, Sample[]>();
  for (const s of all) {
    const key = `${s.measure}|${s.m}|${s.k}|${s.n}|${s.threads}`;
    groups.set(key, [...(groups.get(key) ?? []), s]);
  }
  const res = new Map<string, Agg>();
  for (const [key, ss] of groups) {
    const runsUs = ss.map((s) => s.us);
    const {
      measure: _m,
      m: _mm,
      k: _k,
      n: _n,
      threads: _t,
      us: _u,
      minUs: _mu,
      calls: _c,
      rounds: _r,
      ...extra
    } = ss[0]!;
    const extraMed: Record<string, unknown> = { ...extra };
    if (typeof extra.primUs === 'number') extraMed.primUs = median(ss.map((s) => s.primUs as number));
    res.set(key, {
      us: median(runsUs),
      runsUs,
      spread: Math.max(...runsUs) / Math.min(...runsUs),
      minUs: Math.min(...ss.map((s) => s.minUs)),
      extra: extraMed,
    });
  }
  return res;
}

/**
 * The quantizations of A's rows in es-en's int8 plan (`planc optimize ../shared/models/es-en --quantize int8
 * --dump-after select-variants`: the producer of each qmatmul / qproject_topk input), per decoder step
 * (decoder_with_past, M = batch) and per encoder run (M = batch · source length):
 * - decoder step, K = 256: 15 (3 of the embedding sum: layer 0's k, v, q; 4 of attention outputs: o, o_1 × 2 layers;
 *   8 of layer_norm outputs: q_1 × 2 (ln1), ffn w1 × 2 (ln2), layer 1's k, v, q (dec.0 ln3), qproject_topk (dec.1 ln3));
 *   K = 1024: 2 (ffn w2, of w1's relu output). Those 8 come from 6 layer norms.
 * - encoder, K = 256: 30 (layer 0's q, k, v of the embedding sum; 6 o of attention; 21 of layer_norm outputs: q, k, v of
 *   layers 1-5 (5 ln2) and 6 ffn w1 (6 ln1)); K = 1024: 6 (ffn w2). Those 21 come from 11 layer norms.
 * - distinct K = 256 row sets quantized: 11 per decoder step (the embedding sum's and dec.0 ln3's rows are quantized
 *   3 times each), 18 per encoder run (each layer's q, k, v input 3 times): quantizing once per row set, shared by the
 *   products that read it (or one q|k|v product of N = 768), saves the difference whatever the producer.
 * - products per decoder step: 12 (256, 256), 2 (256, 1024), 2 (1024, 256), one qproject_topk (256, 32000);
 *   per encoder run: 24 (256, 256), 6 (256, 1024), 6 (1024, 256).
 */
const ESEN = {
  step: {
    quant256: 15,
    distinct256: 11,
    quant1024: 2,
    lnConsumers: 8,
    layerNorms: 6,
    products: [
      [256, 256, 12],
      [256, 1024, 2],
      [1024, 256, 2],
    ] as const,
    topk: true,
  },
  encoder: {
    quant256: 30,
    distinct256: 18,
    quant1024: 6,
    lnConsumers: 21,
    layerNorms: 11,
    products: [
      [256, 256, 24],
      [256, 1024, 6],
      [1024, 256, 6],
    ] as const,
    topk: false,
  },
};

function cpuFlags(): string[] {
  try {
    const line = fs
      .readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('flags'));
    const have = new Set((line ?? '').split(':')[1]?.trim().split(/\s+/) ?? []);
    return [
      'avx2',
      'fma',
      'avx512f',
      'avx512bw',
      'avx512vl',
      'avx512_vnni',
      'avx_vnni',
      'avx512_bf16',
      'amx_tile',
      'amx_int8',
      'amx_bf16',
    ].filter((f) => have.has(f));
  } catch {
    return [];
  }
}

export async function benchOnednn(): Promise<void> {
  const why = missing();
  if (why) {
    console.log(`bench onednn: skipped: ${why}`);
    return;
  }
  const b = build();
  if (b.skip) {
    console.log(`bench onednn: skipped: ${b.skip}`);
    return;
  }
  const info = nativeInfo();
  const runs = Math.max(2, Number(process.env.PLANC_BENCH_RUNS) || 3);
  const threadCounts = [...new Set([1, Math.min(2, info.threads)])];
  const samples: Sample[] = [];
  let onednn: Record<string, unknown> = {};
  for (let r = 0; r < runs; r++) {
    for (const t of threadCounts) {
      const nat = runNative(t);
      onednn = nat.info;
      samples.push(...nat.samples, ...runPlanc(t));
      console.log(`run ${r + 1}/${runs}, ${t} thread(s): done`);
    }
  }
  setThreads(info.threads);
  const agg = aggregate(samples);
  const get = (measure: string, m: number, k: number, n: number, t: number) =>
    agg.get(`${measure}|${m}|${k}|${n}|${t}`);
  const us = (measure: string, m: number, k: number, n: number, t: number) => get(measure, m, k, n, t)?.us ?? NaN;

  interface Row {
    k: number;
    n: number;
    m: number;
    threads: number;
    plancInt8Us: number;
    plancInt8InProcessUs: number;
    quantizeUs: number;
    quantShare: number;
    onednnS8Us: number;
    onednnU8Us: number;
    onednnPrimS8Us: number;
    onednnInt8WithQuantUs: number;
    onednnInt8Impl: string;
    int8Speedup: number;
    plancF32Us: number;
    onednnF32Us: number;
    f32Speedup: number;
    onednnF32Impl: string;
    qprojectTopkUs?: number;
    maxSpread: number;
    spreads: Record<string, number>;
    runsUs: Record<string, number[]>;
  }
  const rows: Row[] = [];
  for (const t of threadCounts) {
    for (const [k, n] of SHAPES) {
      for (const m of ROWS) {
        const names = [
          'planc-exec-qmatmul',
          'planc-qmatmul',
          'planc-quantize',
          'onednn-s8',
          'onednn-u8',
          'planc-exec-f32',
          'onednn-f32',
          ...(k === VOCAB[0] && n === VOCAB[1] ? ['planc-exec-qproject_topk'] : []),
        ];
        const spreads: Record<string, number> = {},
          runsUs: Record<string, number[]> = {};
        for (const nm of names) {
          const a = get(nm, m, k, n, t);
          if (a) {
            spreads[nm] = a.spread;
            runsUs[nm] = a.runsUs;
          }
        }
        const s8 = us('onednn-s8', m, k, n, t),
          u8 = us('onednn-u8', m, k, n, t),
          q = us('planc-quantize', m, k, n, t);
        const best = Math.min(s8, u8);
        const plancInt8 = us('planc-exec-qmatmul', m, k, n, t);
        rows.push({
          k,
          n,
          m,
          threads: t,
          plancInt8Us: plancInt8,
          plancInt8InProcessUs: us('planc-qmatmul', m, k, n, t),
          quantizeUs: q,
          quantShare: q / us('planc-qmatmul', m, k, n, t),
          onednnS8Us: s8,
          onednnU8Us: u8,
          onednnPrimS8Us: get('onednn-s8', m, k, n, t)?.extra.primUs as number,
          onednnInt8WithQuantUs: best + q,
          onednnInt8Impl: String(get('onednn-s8', m, k, n, t)?.extra.impl ?? ''),
          int8Speedup: plancInt8 / (best + q),
          plancF32Us: us('planc-exec-f32', m, k, n, t),
          onednnF32Us: us('onednn-f32', m, k, n, t),
          f32Speedup: us('planc-exec-f32', m, k, n, t) / us('onednn-f32', m, k, n, t),
          onednnF32Impl: String(get('onednn-f32', m, k, n, t)?.extra.impl ?? ''),
          ...(k === VOCAB[0] && n === VOCAB[1] ? { qprojectTopkUs: us('planc-exec-qproject_topk', m, k, n, t) } : {}),
          maxSpread: Math.max(...Object.values(spreads)),
          spreads,
          runsUs,
        });
      }
    }
  }

  const f = (x: number, w = 8) =>
    (Number.isFinite(x) ? (x < 10 ? x.toFixed(2) : x < 1000 ? x.toFixed(1) : x.toFixed(0)) : '-').padStart(w);
  console.log(
    `\noneDNN ${String(onednn.onednn)} (${String(onednn.isa)}, ${String(onednn.cpuRuntime)}) vs planc, hot, µs per call, median of ${runs} runs' medians`,
  );
  console.log(
    "int8: planc = qmatmul auto through the executor; oneDNN = its matmul (s8 or u8+zp, the faster) + row-scale pass + planc's quantizer;" +
      " >1x: oneDNN faster. quant = planc's quantize_rows alone, share of in-process qmatmul. spread = max/min of runs, worst of the row.",
  );
  console.log(
    `${'t'.padStart(2)} ${'K x N'.padEnd(11)} ${'M'.padStart(5)} | ${'planc i8'.padStart(8)} ${'in-proc'.padStart(8)} ${'quant'.padStart(8)} ${'share'.padStart(6)} | ` +
      `${'dnn s8'.padStart(8)} ${'dnn u8'.padStart(8)} ${'dnn+q'.padStart(8)} ${'dnn/pl'.padStart(6)} ${'impl'.padEnd(21)} | ${'planc f32'.padStart(9)} ${'dnn f32'.padStart(8)} ${'ratio'.padStart(6)} | ${'topk4'.padStart(8)} spread`,
  );
  for (const r of rows) {
    console.log(
      `${String(r.threads).padStart(2)} ${`${r.k}x${r.n}`.padEnd(11)} ${String(r.m).padStart(5)} | ${f(r.plancInt8Us)} ${f(r.plancInt8InProcessUs)} ${f(r.quantizeUs)} ${(100 * r.quantShare).toFixed(0).padStart(5)}% | ` +
        `${f(r.onednnS8Us)} ${f(r.onednnU8Us)} ${f(r.onednnInt8WithQuantUs)} ${r.int8Speedup.toFixed(2).padStart(5)}x ${r.onednnInt8Impl.padEnd(21)} | ${f(r.plancF32Us, 9)} ${f(r.onednnF32Us)} ${r.f32Speedup.toFixed(2).padStart(5)}x | ` +
        `${r.qprojectTopkUs === undefined ? '-'.padStart(8) : f(r.qprojectTopkUs)} ${r.maxSpread.toFixed(2)}`,
    );
  }

  // What fusing the quantizer into layer_norm would save, per es-en decoder step (M = batch) and encoder run
  // (M = batch · source length): the layer_norm consumers' quantizations go, each layer norm quantizes its row once
  // (at no cost: the upper bound; at the cost of a standalone quantization: the lower bound, i.e. only the repeats);
  // and what quantizing each distinct row set once (whatever its producer) would save.
  const fusion: Record<string, unknown>[] = [];
  console.log(
    "\nquantization of A in es-en int8 (planc quantize_rows time × count, vs the products' time at the same M)",
  );
  for (const t of threadCounts) {
    for (const [graph, g, ms] of [
      ['decoder step', ESEN.step, [1, 8, 32]],
      ['encoder run', ESEN.encoder, [256, 1024]],
    ] as const) {
      for (const m of ms) {
        const q256 = us('planc-quantize', m, 256, 256, t),
          q1024 = us('planc-quantize', m, 1024, 256, t);
        const quantAll = g.quant256 * q256 + g.quant1024 * q1024;
        const products =
          g.products.reduce((s, [k, n, c]) => s + c * us('planc-exec-qmatmul', m, k, n, t), 0) +
          (g.topk ? us('planc-exec-qproject_topk', m, VOCAB[0], VOCAB[1], t) : 0);
        const saveMax = g.lnConsumers * q256,
          saveMin = (g.lnConsumers - g.layerNorms) * q256,
          dedupe = (g.quant256 - g.distinct256) * q256;
        const ffn = g.quant1024 * q1024;
        fusion.push({
          graph,
          m,
          threads: t,
          quantUs: quantAll,
          productsUs: products,
          quantShare: quantAll / products,
          fuseSaveMinUs: saveMin,
          fuseSaveMaxUs: saveMax,
          fuseSaveMinShare: saveMin / products,
          fuseSaveMaxShare: saveMax / products,
          dedupeSaveUs: dedupe,
          dedupeSaveShare: dedupe / products,
          ffnW2QuantUs: ffn,
          ffnW2QuantShare: ffn / products,
        });
        const pct = (x: number) => `${((100 * x) / products).toFixed(1)}%`;
        console.log(
          `t=${t} ${graph.padEnd(12)} M=${String(m).padEnd(5)} quantize ${f(quantAll)} µs of products ${f(products)} µs (${pct(quantAll)});` +
            ` fused into layer_norm saves ${f(saveMin, 0)}..${f(saveMax, 0)} µs (${pct(saveMin)}..${pct(saveMax)}); once per row set: ${f(dedupe, 0)} µs (${pct(dedupe)});` +
            ` ffn w2's rows (K = 1024, from w1's epilogue): ${f(ffn, 0)} µs (${pct(ffn)})`,
        );
      }
    }
  }

  const result = {
    bench: 'onednn',
    machine: machineFacts({
      native: info,
      cpuFlags: cpuFlags(),
      onednn: { version: onednn.onednn, isa: onednn.isa, cpuRuntime: onednn.cpuRuntime },
    }),
    runs,
    mode: 'hot',
    units: "µs per call, median over runs of each run's median",
    notes:
      'oneDNN int8: matmul s8 (zp 0) or u8 (zp 128) × s8 weights, output scales per N, then a row-scale pass (sa) over the f32 output; ' +
      'A already quantized (+ planc quantize_rows for the comparison); weights reordered once outside the timing; one primitive per M',
    rows,
    fusion,
  };
  const file = path.join(REPO_ROOT, 'bench', 'results', 'onednn.jsonl');
  fs.appendFileSync(file, JSON.stringify(result) + '\n');
  console.log(`appended to ${path.relative(REPO_ROOT, file)}`);
}
