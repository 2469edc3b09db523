// Where a benchmark finds ../shared's es-en model; without it the benchmark prints that it is skipped.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sharedDir } from '../compiler/paths.ts';

/** ../shared/models/es-en, or undefined after printing that `bench` is skipped. */
export function esenDir(bench: string): string | undefined {
  const shared = sharedDir();
  const dir = shared ? path.join(shared, 'models', 'es-en') : '';
  if (dir && fs.existsSync(dir)) return dir;
  console.log(`${bench} bench skipped: ../shared/models/es-en is missing`);
  return undefined;
}
