// `npm run build`: compiles the library and CLI to dist/ (tsc -p tsconfig.build.json: JavaScript, .d.ts, imports
// rewritten to .js), copies the files they read at run time (plan.proto, CUDA templates) and stamps the build.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'dist');
const config = JSON.parse(fs.readFileSync(path.join(ROOT, 'tsconfig.build.json'), 'utf8'));

// No stamp while dist/ is being rewritten: bin/planc.js meanwhile runs the sources.
fs.rmSync(path.join(DIST, 'BUILT'), { force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const r = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
if (r.status !== 0) process.exit(r.status ?? 1);

/** Every file of the compiled folders that is neither TypeScript nor documentation goes beside its JavaScript. */
function copyAssets(dir) {
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) copyAssets(rel);
    else if (!/\.(ts|md)$/.test(e.name)) {
      fs.mkdirSync(path.join(DIST, dir), { recursive: true });
      fs.copyFileSync(path.join(ROOT, rel), path.join(DIST, rel));
    }
  }
}
for (const dir of config.include) if (fs.statSync(path.join(ROOT, dir)).isDirectory()) copyAssets(dir);
// bin/planc.js compares this stamp with the sources it was built from (a checkout's stale dist/ is not used): the
// top-level folders and files tsc wrote, which include what the CLI imports from outside tsconfig.build.json's list.
const sources = fs
  .readdirSync(DIST, { withFileTypes: true })
  .filter((e) => e.isDirectory() || e.name.endsWith('.js'))
  .map((e) => (e.isDirectory() ? e.name : e.name.replace(/\.js$/, '.ts')));
fs.writeFileSync(path.join(DIST, 'BUILT'), `${JSON.stringify({ built: new Date().toISOString(), sources })}\n`);
