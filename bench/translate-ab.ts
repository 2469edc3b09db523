// A/B of native addons on one plan: the es-en test ids translated greedily at one batch size by each addon in its own
// process (PLANC_NATIVE_ADDON), rounds interleaved, medians and fastest rounds of wall and process CPU time (on a shared
// machine the CPU time of a one-thread run is the steadier), outputs compared between the addons.
// Run: node --import tsx bench/translate-ab.ts PLAN NAME=ADDON NAME=ADDON [--batch 32] [--rounds 3] [--reps 2] [--threads N]
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sharedDir } from '../compiler/paths.ts';
import { runChild } from './addon-child.ts';

const MAX_LEN = 64;

/** One child: loads the plan on the addon its environment names, translates `reps` times, prints the seconds and a hash. */
async function child(planPath: string, batch: number, reps: number, threads: number): Promise<void> {
  const { loadPlan } = await import('../runtime/plan.ts');
  const { translateIds } = await import('../runtime/decode/translate-ids.ts');
  const { setThreads, nativeInfo } = await import('../runtime/native.ts');
  if (threads > 0) setThreads(threads);
  const ids: number[][] = JSON.parse(
    fs.readFileSync(path.join(sharedDir()!, 'models', 'es-en', 'test_ids.json'), 'utf8'),
  ).src_ids;
  const plan = await loadPlan(planPath);
  await translateIds(plan, ids.slice(0, 64), { batchSize: batch, maxLength: MAX_LEN }); // warm-up
  const seconds: number[] = [],
    cpu: number[] = [];
  let hash = '';
  let tokens = 0;
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now(),
      c0 = process.cpuUsage();
    const out = (await translateIds(plan, ids, { batchSize: batch, maxLength: MAX_LEN })).map((x) => x.ids);
    seconds.push((performance.now() - t0) / 1000);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1e6);
    hash = createHash('sha256').update(JSON.stringify(out)).digest('hex').slice(0, 16);
    tokens = out.reduce((s, o) => s + o.length + 1, 0);
  }
  const info = nativeInfo();
  console.log(
    JSON.stringify({
      seconds,
      cpu,
      hash,
      sentences: ids.length,
      tokens,
      isa: info.isa?.effective,
      threads: info.threads,
    }),
  );
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (name: string, def: number): number => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? Number(args.splice(i, 2)[1]) : def;
  };
  const batch = opt('batch', 32),
    reps = opt('reps', 2),
    rounds = opt('rounds', 3),
    threads = opt('threads', 0);
  if (args[0] === '--child') return child(args[1]!, batch, reps, threads);
  const [planPath, ...sides] = args;
  if (!planPath || sides.length === 0 || sides.some((s) => !s.includes('='))) {
    console.error(
      'usage: bench/translate-ab.ts PLAN NAME=ADDON [NAME=ADDON ...] [--batch 32] [--rounds 3] [--reps 2] [--threads N]',
    );
    process.exitCode = 2;
    return;
  }
  const self = fileURLToPath(import.meta.url);
  const runs = new Map<
    string,
    { seconds: number[]; cpu: number[]; hash: string; sentences: number; tokens: number; isa: string; threads: number }
  >();
  for (let round = 0; round < rounds; round++) {
    for (const s of round % 2 ? [...sides].reverse() : sides) {
      const [name, addon] = s.split('=') as [string, string];
      const got = runChild(self, name, addon, planPath, { batch, reps, threads });
      const prev = runs.get(name);
      runs.set(
        name,
        prev ? { ...got, seconds: [...prev.seconds, ...got.seconds], cpu: [...prev.cpu, ...got.cpu] } : got,
      );
      console.error(
        `round ${round + 1} ${name}: ${got.seconds.map((x: number) => x.toFixed(3)).join(' ')} s (CPU ${got.cpu.map((x: number) => x.toFixed(3)).join(' ')} s)`,
      );
    }
  }
  const hashes = new Set([...runs.values()].map((r) => r.hash));
  const out = Object.fromEntries(
    [...runs].map(([name, r]) => [
      name,
      {
        medianS: median(r.seconds),
        minS: Math.min(...r.seconds),
        sentencesPerS: r.sentences / median(r.seconds),
        cpuMedianS: median(r.cpu),
        cpuMinS: Math.min(...r.cpu),
        seconds: r.seconds,
        cpu: r.cpu,
        isa: r.isa,
        threads: r.threads,
        hash: r.hash,
      },
    ]),
  );
  console.log(
    JSON.stringify({
      plan: path.basename(planPath),
      batch,
      sentences: [...runs.values()][0]!.sentences,
      tokens: [...runs.values()][0]!.tokens,
      identical: hashes.size === 1,
      sides: out,
    }),
  );
}

await main();
