// Runs the planc command line as a user would (node bin/planc.js ARGS), with optional standard input.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import * as path from 'node:path';
import { REPO_ROOT } from '../../compiler/paths.ts';

export function planc(args: string[], input?: string): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), ...args], { encoding: 'utf8', ...(input !== undefined ? { input } : {}) });
}
