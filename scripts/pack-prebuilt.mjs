// npm pack hooks: prepack puts this checkout's addon build into prebuilds/<platform>-<arch>/ when it is portable (the
// default x86-64-v2 baseline with run-time dispatch, no test kernels); postpack (--clean) removes it again.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PREBUILDS = path.join(ROOT, 'prebuilds');
const BUILD = path.join(ROOT, 'native', 'build');
const ADDON = path.join(BUILD, 'Release', 'planc_native.node');
const say = (msg) => process.stderr.write(`planc pack: ${msg}\n`);

/** Why the local build cannot ship as the prebuilt binary (undefined: it can). */
function notPortable() {
  if (!fs.existsSync(ADDON)) return `${path.relative(ROOT, ADDON)} is not built (npm run build:native)`;
  const cache = fs.existsSync(path.join(BUILD, 'CMakeCache.txt'))
    ? fs.readFileSync(path.join(BUILD, 'CMakeCache.txt'), 'utf8')
    : '';
  if (/^PLANC_NATIVE_ARCH:BOOL=(ON|1|TRUE)$/im.test(cache))
    return 'it was built with PLANC_NATIVE_ARCH (-march=native)';
  if (/^PLANC_TEST_KERNELS:BOOL=(ON|1|TRUE)$/im.test(cache)) return 'it was built with the test kernels';
  if (!/^CMAKE_BUILD_TYPE:STRING=Release$/m.test(cache)) return 'it is not a Release build';
  return undefined;
}

fs.rmSync(PREBUILDS, { recursive: true, force: true });
if (!process.argv.includes('--clean')) {
  const why = notPortable();
  if (why) {
    say(`packing without a prebuilt addon (${why}): installs will build it with cmake-js`);
  } else {
    const dir = path.join(PREBUILDS, `${process.platform}-${process.arch}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(ADDON, path.join(dir, 'planc_native.node'));
    say(
      `prebuilt addon ${path.relative(ROOT, dir)}/planc_native.node (${(fs.statSync(ADDON).size / 1e6).toFixed(1)} MB)`,
    );
  }
}
