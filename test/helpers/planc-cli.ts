// Runs the planc command line as a user would (node bin/planc.js ARGS), with optional standard input.
import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import * as path from 'node:path';
import { REPO_ROOT } from '../../compiler/paths.ts';

export function planc(args: string[], input?: string): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), ...args], {
    encoding: 'utf8',
    ...(input !== undefined ? { input } : {}),
  });
}

/** Starts `planc worker ARGS`; resolves once it takes jobs (its start line on standard error), rejects if it exits first. */
export function startPlancWorker(args: string[]): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const w = spawn(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), 'worker', ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    w.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      if (/from queue/.test(err)) resolve(w);
    });
    w.on('exit', (code) => {
      if (!/from queue/.test(err)) reject(new Error(`planc worker exited ${code}: ${err}`));
    });
  });
}
