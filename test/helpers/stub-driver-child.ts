// Child process of test/cuda-runtime.test.ts: loads a cuda plan on the fake libcuda (test/native/cuda-stub.c) and
// either runs each graph once on random feeds (printing JSON: the device name, the launches expected per graph, any
// error); or, with --decode, runs greedy decoding (a fixed token per step, batch shrinking) while marking each step in
// the stub's copy log ($PLANC_CUDA_STUB_COPY_LOG), printing JSON: the rows and host output bytes of every step; or,
// with --spans, checks device resident span copies (grouped into 1D/2D driver copies) against in-order host copies.
import * as fs from 'node:fs';
import { DecodingRules } from '../../runtime/decode/conventions.ts';
import { greedyBatch } from '../../runtime/decode/greedy.ts';
import { loadPlan } from '../../runtime/plan.ts';
import { cloneFeeds, randomFeeds } from './random-feeds.ts';

const [file, only] = process.argv.slice(2);
const plan = await loadPlan(file!);

/** Greedy decoding of three sentences (caps 3, 5, 5 tokens: the first leaves the batch) with token 5 every step. */
function decode() {
  const copyLog = process.env.PLANC_CUDA_STUB_COPY_LOG!;
  const steps: { rows: number; outBytes: number[] }[] = [];
  const sources = [
    [7, 8, 9, 10, 2],
    [11, 12, 2],
    [13, 14, 15, 2],
  ];
  fs.appendFileSync(copyLog, '# decode\n');
  const rules = new DecodingRules({ startId: 0, eosId: 100, padId: 0 });
  greedyBatch(plan, sources, [3, 5, 5], rules, false, (out, r) => {
    if (r === 0) {
      const rows = Object.values(out)[0]!.dims[0]!;
      steps.push({ rows, outBytes: Object.values(out).map((t) => t.data.byteLength) });
      fs.appendFileSync(copyLog, `# pick ${steps.length - 1}\n`);
    }
    return 5;
  });
  return steps;
}

/** In-order span copies on host bytes: what residentCopy means. */
function reference(src: Uint8Array, dst: Uint8Array, spans: number[]): void {
  for (let i = 0; i < spans.length; i += 3) dst.set(src.slice(spans[i]!, spans[i]! + spans[i + 2]!), spans[i + 1]!);
}

/** Span lists shaped like cache fills, gathers and compactions (plus random ones) on device residents vs reference(). */
function spanCases() {
  const copyLog = process.env.PLANC_CUDA_STUB_COPY_LOG!;
  const N = 4096;
  let seed = 7;
  const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  const cases: { name: string; same: boolean; spans: number[] }[] = [];
  // a fill: rows × heads spans of s positions into a capacity-strided layout (one 2D copy)
  const fill: number[] = [];
  for (let rh = 0; rh < 6; rh++) fill.push(rh * 32, 1024 + rh * 128, 32);
  cases.push({ name: 'fill', same: false, spans: fill });
  // a beam gather through the spare: rows [2, 0, 0, 1] of 2 heads
  const gather: number[] = [];
  [2, 0, 0, 1].forEach((r, i) => {
    for (let h = 0; h < 2; h++) gather.push(r * 256 + h * 128, i * 256 + h * 128, 96);
  });
  cases.push({ name: 'gather', same: false, spans: gather });
  // an in-place compaction: rows [1, 2, 3] → [0, 1, 2], 2 heads each, and whole contiguous rows
  const down: number[] = [];
  [1, 2, 3].forEach((r, i) => {
    for (let h = 0; h < 2; h++) down.push(r * 256 + h * 128, i * 256 + h * 128, 96);
  });
  cases.push({ name: 'compact heads', same: true, spans: down });
  cases.push({ name: 'compact rows', same: true, spans: [256, 0, 256, 512, 256, 256, 768, 512, 256] });
  for (let k = 0; k < 40; k++) {
    const spans: number[] = [];
    const same = k % 2 === 0;
    const n = 1 + rand(12);
    const len = 8 * (1 + rand(16));
    const sp = len + 8 * rand(4),
      dp = len + 8 * rand(4),
      s0 = 8 * rand(64),
      d0 = 8 * rand(64);
    for (let i = 0; i < n; i++) {
      const regular = rand(4) !== 0;
      const [s, d, b] = regular ? [s0 + i * sp, d0 + i * dp, len] : [8 * rand(400), 8 * rand(400), 8 * rand(20)];
      if (s + b > N || d + b > N || (same && s < d + b && d < s + b && s !== d)) continue;
      spans.push(s, d, b);
    }
    cases.push({ name: `random ${k}`, same, spans });
  }
  const out: { name: string; ok: boolean; copies: string[] }[] = [];
  for (const c of cases) {
    const init = Uint8Array.from({ length: N }, () => rand(256));
    const initDst = Uint8Array.from({ length: N }, () => rand(256));
    const src = plan.residentNew(N);
    const dst = c.same ? src : plan.residentNew(N);
    plan.residentWrite(src, 0, init);
    if (!c.same) plan.residentWrite(dst, 0, initDst);
    const want = c.same ? init.slice() : initDst.slice();
    reference(c.same ? want : init, want, c.spans);
    const before = fs.existsSync(copyLog) ? fs.readFileSync(copyLog, 'utf8').length : 0;
    plan.residentCopy(src, dst, c.spans);
    const copies = fs
      .readFileSync(copyLog, 'utf8')
      .slice(before)
      .trim()
      .split('\n')
      .filter((l) => l);
    const got = new Uint8Array(N);
    plan.residentRead(dst, 0, got);
    out.push({ name: c.name, ok: got.every((x, i) => x === want[i]), copies });
  }
  return out;
}

const result: {
  device: string;
  runs: { graph: string; calls: string[]; outputs: Record<string, number[]> }[];
  steps?: ReturnType<typeof decode>;
  spans?: ReturnType<typeof spanCases>;
  error?: string;
} = {
  device: plan.device,
  runs: [],
};
try {
  if (only === '--decode') {
    result.steps = decode();
  } else if (only === '--spans') {
    result.spans = spanCases();
  } else {
    for (const graph of plan.graphs) {
      if (only && graph !== only) continue;
      const feeds = randomFeeds(plan, graph, {
        batch: 3,
        srcLen: 7,
        past: 2,
        vocab: plan.header.decoding.vocabSize ?? 100,
        seed: 5,
      });
      const out = plan.runSync(graph, cloneFeeds(feeds));
      const p = plan.header.programs.find((x) => x.graph === graph)!;
      const calls = plan.header.cuda!.programs[plan.header.programs.indexOf(p)]!.calls.map((c) =>
        c.variants.map((v) => v.entry).join('|'),
      );
      result.runs.push({ graph, calls, outputs: Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.dims])) });
    }
  }
} catch (e) {
  result.error = (e as Error).stack ?? (e as Error).message;
}
plan.close();
console.log(JSON.stringify(result));
