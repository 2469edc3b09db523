// The emulated CUDA device (native/cudasim): PLANC_DEVICE=sim (or --device sim) points the cuda backend's driver at
// cudasim's libcuda.so.1, built here with g++ on first use, which runs the plan's CUDA source on the CPU, slowly.
// Its sources are found from the package root (a checkout's, or an installed package's, which ships native/cudasim).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PlancError } from '../../compiler/diagnostics.ts';
import { fail } from '../../compiler/diagnostics-catalog.ts';
import { REPO_ROOT } from '../../compiler/paths.ts';

export const CUDASIM_DIR = path.join(REPO_ROOT, 'native', 'cudasim');
const DRIVER_SOURCES = ['driver.cc', 'compile.cc', 'compile.h', 'guard.h'];

/**
 * Where the driver and the kernels' modules are built: native/cudasim/build in a checkout; for an installed package
 * (whose folder may not be writable) $XDG_CACHE_HOME/planc/cudasim, else ~/.cache/planc/cudasim.
 */
function buildRoot(): string {
  if (fs.existsSync(path.join(REPO_ROOT, 'runtime', 'backends', 'cudasim.ts'))) return path.join(CUDASIM_DIR, 'build');
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'planc', 'cudasim');
}

/** Whether cuda plans run on the emulated device (PLANC_DEVICE=sim). */
export function simSelected(): boolean {
  return process.env.PLANC_DEVICE === 'sim';
}

/** cudasim's libcuda.so.1, built (g++) when its sources changed; named by their hash, so builds never collide. */
export function simDriverPath(): string {
  const missing = DRIVER_SOURCES.filter((f) => !fs.existsSync(path.join(CUDASIM_DIR, f)));
  if (missing.length > 0) {
    throw new PlancError(
      'PLANC_E403',
      `the emulated CUDA device's sources are not in this installation (${missing.map((f) => path.join(CUDASIM_DIR, f)).join(', ')}): reinstall planc`,
    );
  }
  // The hash covers the folder too: the driver has it built in (PLANC_CUDASIM_DIR overrides), and the cache is shared.
  const h = createHash('sha256').update(CUDASIM_DIR);
  for (const f of DRIVER_SOURCES) h.update(fs.readFileSync(path.join(CUDASIM_DIR, f)));
  const dir = path.join(buildRoot(), `driver-${h.digest('hex').slice(0, 16)}`);
  const lib = path.join(dir, 'libcuda.so.1');
  if (fs.existsSync(lib)) return lib;
  try {
    fs.mkdirSync(dir, { recursive: true });
  } catch (e) {
    throw new PlancError(
      'PLANC_E403',
      `cannot build the emulated CUDA device: cannot create ${dir}: ${(e as Error).message}`,
    );
  }
  const tmp = `${lib}.${process.pid}`;
  const r = spawnSync(
    process.env.PLANC_CUDASIM_CXX || 'g++',
    [
      '-std=c++17',
      '-O2',
      '-fPIC',
      '-shared',
      '-Wl,-soname,libcuda.so.1',
      `-DCUDASIM_DIR="${CUDASIM_DIR}"`,
      path.join(CUDASIM_DIR, 'driver.cc'),
      path.join(CUDASIM_DIR, 'compile.cc'),
      '-o',
      tmp,
      '-ldl',
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) {
    throw new PlancError(
      'PLANC_E403',
      `cannot build the emulated CUDA device (native/cudasim) with g++: ${r.error?.message ?? r.stderr.slice(0, 2000)}`,
    );
  }
  fs.renameSync(tmp, lib);
  return lib;
}

/** Selects the emulated driver for this process (before the native cuda API first loads). */
export function enableSim(): void {
  process.env.PLANC_CUDA_DRIVER = simDriverPath();
  process.env.PLANC_CUDASIM_DIR ??= CUDASIM_DIR;
  process.env.PLANC_CUDASIM_CACHE ??= path.join(buildRoot(), 'modules');
}

/** What cuModuleLoadData gets on the emulated device: the plan's CUDA source, NUL-terminated (it builds that). */
export function simImage(source: string): Uint8Array {
  return Buffer.from(`${source}\0`, 'utf8');
}

/** `--device NAME` of planc translate / run: `sim` selects the emulated device for cuda plans, `gpu` (default) the driver. */
export function applyDevice(device: string | undefined): void {
  if (device === undefined || device === 'gpu') return;
  if (device !== 'sim')
    fail('badOption', { option: 'device', value: device, expected: 'sim (the emulated CUDA device) or gpu' });
  process.env.PLANC_DEVICE = 'sim';
}
