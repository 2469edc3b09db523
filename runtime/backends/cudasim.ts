// The emulated CUDA device (native/cudasim): PLANC_DEVICE=sim (or --device sim) points the cuda backend's driver at
// cudasim's libcuda.so.1, built here with g++ on first use, which runs the plan's CUDA source on the CPU, slowly.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PlancError } from '../../compiler/diagnostics.ts';
import { REPO_ROOT } from '../../compiler/paths.ts';

export const CUDASIM_DIR = path.join(REPO_ROOT, 'native', 'cudasim');
const DRIVER_SOURCES = ['driver.cc', 'compile.cc', 'compile.h', 'guard.h'];

/** Whether cuda plans run on the emulated device (PLANC_DEVICE=sim). */
export function simSelected(): boolean {
  return process.env.PLANC_DEVICE === 'sim';
}

/** cudasim's libcuda.so.1, built (g++) when its sources changed; named by their hash, so builds never collide. */
export function simDriverPath(): string {
  const h = createHash('sha256');
  for (const f of DRIVER_SOURCES) h.update(fs.readFileSync(path.join(CUDASIM_DIR, f)));
  const dir = path.join(CUDASIM_DIR, 'build', `driver-${h.digest('hex').slice(0, 16)}`);
  const lib = path.join(dir, 'libcuda.so.1');
  if (fs.existsSync(lib)) return lib;
  fs.mkdirSync(dir, { recursive: true });
  const tmp = `${lib}.${process.pid}`;
  const r = spawnSync(process.env.PLANC_CUDASIM_CXX || 'g++', ['-std=c++17', '-O2', '-fPIC', '-shared', '-Wl,-soname,libcuda.so.1',
    `-DCUDASIM_DIR="${CUDASIM_DIR}"`, path.join(CUDASIM_DIR, 'driver.cc'), path.join(CUDASIM_DIR, 'compile.cc'), '-o', tmp, '-ldl'], { encoding: 'utf8' });
  if (r.status !== 0) {
    throw new PlancError('PLANC_E403', `cannot build the emulated CUDA device (native/cudasim) with g++: ${r.error?.message ?? r.stderr.slice(0, 2000)}`);
  }
  fs.renameSync(tmp, lib);
  return lib;
}

/** Selects the emulated driver for this process (before the native cuda API first loads). */
export function enableSim(): void {
  process.env.PLANC_CUDA_DRIVER = simDriverPath();
  process.env.PLANC_CUDASIM_DIR ??= CUDASIM_DIR;
}

/** What cuModuleLoadData gets on the emulated device: the plan's CUDA source, NUL-terminated (it builds that). */
export function simImage(source: string): Uint8Array {
  return Buffer.from(`${source}\0`, 'utf8');
}

/** `--device NAME` of planc translate / run: `sim` selects the emulated device for cuda plans, `gpu` (default) the driver. */
export function applyDevice(device: string | undefined): void {
  if (device === undefined || device === 'gpu') return;
  if (device !== 'sim') throw new PlancError('PLANC_E301', `--device ${device}: expected sim (the emulated CUDA device) or gpu`);
  process.env.PLANC_DEVICE = 'sim';
}
