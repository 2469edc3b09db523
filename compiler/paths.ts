// Locations the tools use: the repository root and the shared fixtures folder beside it (PLANC_SHARED overrides).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The shared fixtures folder (ONNX tests, real models), or undefined in a user's clone that has none. */
export function sharedDir(): string | undefined {
  const p = process.env.PLANC_SHARED ?? path.join(REPO_ROOT, '..', 'shared');
  return fs.existsSync(p) ? p : undefined;
}
