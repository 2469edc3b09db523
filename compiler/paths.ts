// Locations the tools use: the repository (or installed package) root and the shared fixtures folder beside it
// (PLANC_SHARED overrides).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The checkout's or installed package's root: this file is compiler/paths.ts in a checkout, dist/compiler/paths.js
 * when compiled (the files the package ships beside dist/, such as native/cudasim, are found from here).
 */
export const REPO_ROOT = (() => {
  const up = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  return path.basename(up) === 'dist' && fs.existsSync(path.join(up, '..', 'package.json')) ? path.dirname(up) : up;
})();

/** The shared fixtures folder (ONNX tests, real models), or undefined in a user's clone that has none. */
export function sharedDir(): string | undefined {
  const p = process.env.PLANC_SHARED ?? path.join(REPO_ROOT, '..', 'shared');
  return fs.existsSync(p) ? p : undefined;
}
