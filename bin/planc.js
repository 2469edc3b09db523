#!/usr/bin/env node
// planc command-line entry: runs the compiled CLI (dist/cli/main.js) when it is there and current, else cli/main.ts
// through the TypeScript loader tsx (a development checkout without `npm run build`, or with sources edited since).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const COMPILED = path.join(ROOT, 'dist', 'cli', 'main.js');
const SOURCE = path.join(ROOT, 'cli', 'main.ts');

/** The newest modification time of a file, or of the files under a folder (ms; 0 when it is not there). */
function newest(p) {
  let st;
  try { st = fs.statSync(p); } catch { return 0; }
  if (!st.isDirectory()) return st.mtimeMs;
  return fs.readdirSync(p).reduce((t, name) => Math.max(t, newest(path.join(p, name))), 0);
}

/**
 * A published package has only dist/; a checkout uses dist/ only when `npm run build` finished after the last edit
 * of the sources it compiled (dist/BUILT lists them: scripts/build-dist.mjs).
 */
function compiledIsCurrent() {
  if (!fs.existsSync(COMPILED)) return false;
  if (!fs.existsSync(SOURCE)) return true;
  const stamp = path.join(ROOT, 'dist', 'BUILT');
  let sources;
  try { sources = JSON.parse(fs.readFileSync(stamp, 'utf8')).sources; } catch { return false; }
  const built = fs.statSync(stamp).mtimeMs;
  return Array.isArray(sources) && sources.every((s) => newest(path.join(ROOT, s)) <= built);
}

if (compiledIsCurrent()) {
  await import(pathToFileURL(COMPILED).href);
} else {
  const tsx = await import('tsx/esm/api').catch(() => undefined);
  if (!tsx) {
    process.stderr.write(`planc: ${COMPILED} is missing or older than the sources, and tsx (a development dependency) is not installed: ` +
      'run `npm ci && npm run build` in the planc folder\n');
    process.exit(2);
  }
  tsx.register();
  await import(pathToFileURL(SOURCE).href);
}
