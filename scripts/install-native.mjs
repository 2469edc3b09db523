// The package's install script: makes the native addon loadable here, using the shipped prebuilt binary when it loads,
// else building it with cmake-js (node-addon-api found wherever npm put it), else saying what is missing and how to fix it.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BUILT = path.join(ROOT, 'native', 'build', 'Release', 'planc_native.node');
const PREBUILT = path.join(ROOT, 'prebuilds', `${process.platform}-${process.arch}`, 'planc_native.node');
const SELF = `node ${fileURLToPath(import.meta.url)}`;
const force = process.argv.includes('--build');

const say = (msg) => process.stderr.write(`planc: ${msg}\n`);

/** Whether the addon at file loads and answers, tried in a child process (a binary this CPU cannot run kills only it). */
function loads(file) {
  if (!fs.existsSync(file)) return { ok: false, why: `${file} is missing` };
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(file)}).kernelNames()`], { encoding: 'utf8' });
  if (r.status === 0) return { ok: true };
  const first = (r.stderr || '').split('\n').find((l) => /Error|error:/.test(l)) ?? `exit ${r.status ?? r.signal}`;
  return { ok: false, why: first.trim() };
}

function has(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

/** node-addon-api's folder (napi.h) as Node resolves it from this package: npm may have hoisted it anywhere above. */
function addonApiDir() {
  try {
    return path.dirname(createRequire(path.join(ROOT, 'package.json')).resolve('node-addon-api/package.json'));
  } catch {
    return undefined;
  }
}

function build() {
  const missing = [];
  if (!has('cmake')) missing.push('cmake');
  if (!has('c++') && !has('g++') && !has('clang++')) missing.push('g++');
  const napi = addonApiDir();
  let cmakeJs;
  try {
    cmakeJs = createRequire(path.join(ROOT, 'package.json')).resolve('cmake-js/bin/cmake-js');
  } catch {
    missing.push('the npm package cmake-js');
  }
  if (!napi) missing.push('the npm package node-addon-api');
  if (missing.length) {
    const apt = missing.filter((m) => !m.startsWith('the npm')).concat(['libopenblas-dev']);
    say(
      `cannot build the native addon: ${missing.join(', ')} missing. Install them ` +
        `(Debian/Ubuntu: apt-get install ${apt.join(' ')}${missing.some((m) => m.startsWith('the npm')) ? '; npm install cmake-js node-addon-api' : ''}), ` +
        `then run \`${SELF}\`. Until then planc cannot run plans (it says so, naming this command).`,
    );
    return false;
  }
  const jobs = String(Math.max(1, Math.min(os.availableParallelism?.() ?? os.cpus().length, 8)));
  say(`building the native addon with cmake-js (${jobs} jobs; a few minutes)`);
  const r = spawnSync(
    process.execPath,
    [
      cmakeJs,
      'compile',
      '-d',
      path.join(ROOT, 'native'),
      '-O',
      path.join(ROOT, 'native', 'build'),
      '--parallel',
      jobs,
      `--CDPLANC_NODE_ADDON_API_INC=${napi}`,
    ],
    { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  if (r.status !== 0) {
    say(
      `building the native addon failed:\n${`${r.stdout}\n${r.stderr}`.trim().split('\n').slice(-25).join('\n')}\n` +
        `planc: fix the above (Debian/Ubuntu: apt-get install cmake g++ libopenblas-dev), then run \`${SELF}\``,
    );
    return false;
  }
  const check = loads(BUILT);
  if (!check.ok) say(`the addon built but does not load: ${check.why}`);
  return check.ok;
}

function main() {
  if (process.env.PLANC_NATIVE_ADDON) return; // the user chose an addon
  // A development checkout (sources present) builds with `npm run build:native` (scripts/setup.sh), not at `npm ci`.
  if (!force && fs.existsSync(path.join(ROOT, 'runtime', 'native.ts'))) return;
  if (!force && loads(BUILT).ok) return;
  if (!force) {
    const pre = loads(PREBUILT);
    if (pre.ok) return;
    if (fs.existsSync(PREBUILT)) say(`the prebuilt addon does not load here (${pre.why}): building it`);
    else say(`no prebuilt addon for ${process.platform}-${process.arch}: building it`);
  }
  build();
}

main();
