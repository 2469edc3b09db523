// A/B of native addons on the es-en encoder of plan files: each (plan, threads, addon) in its own process
// (PLANC_NATIVE_ADDON), rounds interleaved in alternating order, the fastest run and the median of each kept, with the
// sha256 of the encoder outputs compared between the addons (bit for bit). Appends to bench/results/encoder-ab.jsonl.
// Run: node --import tsx bench/encoder-ab.ts PLAN[,PLAN] NAME=ADDON NAME=ADDON [--batch 32] [--rounds 5] [--reps 10]
//      [--threads 1,2] [--note TEXT]
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { machineFacts } from './machine.ts';
import { runChild } from './addon-child.ts';
import { sourceFeeds } from '../runtime/decode/source-feeds.ts';

/** The first `batch` test sentences as encoder feeds (padded to the longest, mask 0 past each row's end). */
function feedsFor(batch: number): { feeds: Record<string, RtTensor>; tokens: number } {
  const ids: number[][] = JSON.parse(
    fs.readFileSync(path.join(sharedDir()!, 'models', 'es-en', 'test_ids.json'), 'utf8'),
  ).src_ids.slice(0, batch);
  const { ids: input_ids, mask: attention_mask } = sourceFeeds(ids, 0);
  return { feeds: { input_ids, attention_mask }, tokens: input_ids.dims[1]! };
}

/** One child: the plan on the addon its environment names; 3 warm runs, then `reps` timed; ms per run and a hash. */
async function child(planPath: string, batch: number, reps: number, threads: number): Promise<void> {
  const { loadPlan } = await import('../runtime/plan.ts');
  const { setThreads, nativeInfo } = await import('../runtime/native.ts');
  setThreads(threads);
  const { feeds } = feedsFor(batch);
  const plan = await loadPlan(planPath);
  let out = plan.runSync('encoder', feeds);
  for (let i = 0; i < 2; i++) out = plan.runSync('encoder', feeds);
  const hash = createHash('sha256');
  for (const name of Object.keys(out).sort()) {
    const t = out[name]!;
    hash.update(name).update(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  }
  const ms: number[] = [],
    cpuMs: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now(),
      c0 = process.cpuUsage();
    plan.runSync('encoder', feeds);
    ms.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpuMs.push((c.user + c.system) / 1000);
  }
  plan.close();
  const info = nativeInfo();
  console.log(
    JSON.stringify({
      ms,
      cpuMs,
      hash: hash.digest('hex').slice(0, 16),
      isa: info.isa?.effective,
      threads: info.threads,
    }),
  );
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const r3 = (x: number): number => +x.toFixed(3);

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (name: string, def: string): string => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args.splice(i, 2)[1]! : def;
  };
  const batch = Number(opt('batch', '32')),
    reps = Number(opt('reps', '10')),
    rounds = Number(opt('rounds', '5')),
    threadList = opt('threads', '1,2').split(',').map(Number),
    note = opt('note', '');
  if (args[0] === '--child') return child(args[1]!, batch, reps, threadList[0]!);
  const [planArg, ...sides] = args;
  if (!planArg || sides.length === 0 || sides.some((s) => !s.includes('='))) {
    console.error(
      'usage: bench/encoder-ab.ts PLAN[,PLAN] NAME=ADDON [NAME=ADDON ...] [--batch 32] [--rounds 5] [--reps 10] [--threads 1,2]',
    );
    process.exitCode = 2;
    return;
  }
  const self = fileURLToPath(import.meta.url);
  const plans = planArg.split(',');
  type Side = { ms: number[]; cpuMs: number[]; roundMedians: number[]; hash: string; isa: string };
  const runs = new Map<string, Side>();
  for (let round = 0; round < rounds; round++)
    for (const planPath of plans)
      for (const threads of threadList)
        for (const s of round % 2 ? [...sides].reverse() : sides) {
          const [name, addon] = s.split('=') as [string, string];
          const got = runChild(self, name, addon, planPath, { batch, reps, threads });
          const key = `${path.basename(planPath)}|${threads}|${name}`;
          const prev = runs.get(key);
          runs.set(key, {
            ms: [...(prev?.ms ?? []), ...got.ms],
            cpuMs: [...(prev?.cpuMs ?? []), ...got.cpuMs],
            roundMedians: [...(prev?.roundMedians ?? []), median(got.ms)],
            hash: got.hash,
            isa: got.isa,
          });
          console.error(
            `round ${round + 1} ${path.basename(planPath)} t${threads} ${name}: min ${Math.min(...got.ms).toFixed(2)} ms, median ${median(got.ms).toFixed(2)} ms, ${got.hash}`,
          );
        }
  const names = sides.map((s) => s.split('=')[0]!);
  const rows = plans.flatMap((planPath) =>
    threadList.map((threads) => {
      const of = (name: string) => runs.get(`${path.basename(planPath)}|${threads}|${name}`)!;
      const [a, b] = [of(names[0]!), of(names[names.length - 1]!)];
      return {
        plan: path.basename(planPath),
        threads,
        ...Object.fromEntries(
          names.map((n) => {
            const s = of(n);
            return [
              n,
              {
                minMs: r3(Math.min(...s.ms)),
                medianMs: r3(median(s.roundMedians)),
                cpuMinMs: r3(Math.min(...s.cpuMs)),
                hash: s.hash,
                isa: s.isa,
              },
            ];
          }),
        ),
        speedupMin: +(Math.min(...a.ms) / Math.min(...b.ms)).toFixed(4),
        speedupMedian: +(median(a.roundMedians) / median(b.roundMedians)).toFixed(4),
        speedupCpuMin: +(Math.min(...a.cpuMs) / Math.min(...b.cpuMs)).toFixed(4),
        identical: names.every((n) => of(n).hash === a.hash),
      };
    }),
  );
  for (const r of rows) console.log(JSON.stringify(r));
  const record = {
    bench: 'encoder-ab',
    ...machineFacts({ loadavg: os.loadavg().map((x) => +x.toFixed(2)) }),
    sides: Object.fromEntries(sides.map((s) => s.split('='))),
    batch,
    rounds,
    reps,
    note,
    rows,
  };
  fs.appendFileSync(path.join(REPO_ROOT, 'bench', 'results', 'encoder-ab.jsonl'), `${JSON.stringify(record)}\n`);
}

await main();
