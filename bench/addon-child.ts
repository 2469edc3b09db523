// A/B benches' child runs: this bench's --child mode in a fresh process on one addon build (PLANC_NATIVE_ADDON).
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

/** Runs `self --child PLAN --batch B --reps R --threads T` with the addon `addon`; returns its last stdout line, parsed (the child's own JSON). */
export function runChild(
  self: string,
  side: string,
  addon: string,
  planPath: string,
  opts: { batch: number; reps: number; threads: number },
) {
  const args = ['--import', 'tsx', self, '--child', planPath, '--batch', String(opts.batch)];
  args.push('--reps', String(opts.reps), '--threads', String(opts.threads));
  const r = spawnSync(process.execPath, args, {
    env: { ...process.env, PLANC_NATIVE_ADDON: path.resolve(addon) },
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  if (r.status !== 0) throw new Error(`${side}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}
