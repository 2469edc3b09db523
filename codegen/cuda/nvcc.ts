// The nvcc driver: finds nvcc, compiles a plan's .cu into one fatbin for the requested archs, parses ptxas -v.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PlancError } from '../../compiler/diagnostics.ts';
import { fail } from '../../compiler/diagnostics-catalog.ts';
import type { CudaKernelStats } from '../../compiler/plan/types.ts';

export const DEFAULT_ARCHS = ['sm_80', 'sm_90'];

const INSTALL =
  "install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads; Debian/Ubuntu: the cuda-nvcc package of NVIDIA's repository) " +
  'and put nvcc on PATH, or set PLANC_NVCC=/path/to/nvcc';

/** Parses `--arch sm_80,sm_90` (also "80,90"); every entry must be a real sm arch, sm_80 or newer (TF32 tensor cores). */
export function parseArchs(s: string | undefined): string[] {
  if (s === undefined) return [...DEFAULT_ARCHS];
  const archs = s
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a)
    .map((a) => (/^\d+a?$/.test(a) ? `sm_${a}` : a));
  if (archs.length === 0)
    throw new PlancError('PLANC_E302', (opt) => `${opt('arch')} needs at least one arch, e.g. sm_80,sm_90`);
  for (const a of archs) {
    const m = /^sm_(\d+)(a?)$/.exec(a);
    if (!m) fail('optionProblem', { option: 'arch', why: `'${a}' is not an sm arch (e.g. sm_80, sm_90)` });
    if (Number(m[1]) < 80)
      fail('optionProblem', {
        option: 'arch',
        value: a,
        why: "planc's CUDA kernels need sm_80 or newer (TF32 tensor cores)",
      });
  }
  return [...new Set(archs)].sort((x, y) => Number(/\d+/.exec(x)![0]) - Number(/\d+/.exec(y)![0]));
}

/** The nvcc to use: $PLANC_NVCC, else nvcc on PATH, else /usr/local/cuda/bin/nvcc; a PlancError saying how to install it. */
export function findNvcc(): string {
  const env = process.env.PLANC_NVCC;
  if (env) {
    if (!fs.existsSync(env)) throw new PlancError('PLANC_E601', `PLANC_NVCC=${env} does not exist: ${INSTALL}`);
    return env;
  }
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter((d) => d)) {
    const f = path.join(dir, 'nvcc');
    if (fs.existsSync(f)) return f;
  }
  if (fs.existsSync('/usr/local/cuda/bin/nvcc')) return '/usr/local/cuda/bin/nvcc';
  throw new PlancError('PLANC_E601', (opt) => `${opt('target')} cuda needs nvcc, which was not found: ${INSTALL}`);
}

/** "13.0.88" from `nvcc --version`. */
export function nvccVersion(nvcc: string): string {
  const r = spawnSync(nvcc, ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0)
    throw new PlancError('PLANC_E601', `${nvcc} --version failed (${r.error?.message ?? r.stderr.trim()}): ${INSTALL}`);
  const m = /release [\d.]+, V([\d.]+)/.exec(r.stdout);
  return m ? m[1]! : (r.stdout.trim().split('\n').pop() ?? 'unknown');
}

/** -gencode flags: SASS for every arch, plus PTX of the highest so newer GPUs can JIT it. */
export function gencodeFlags(archs: string[]): string[] {
  const flags: string[] = [];
  archs.forEach((a, i) => {
    const n = a.slice(3);
    const code = i === archs.length - 1 ? `[sm_${n},compute_${n}]` : `sm_${n}`;
    flags.push(`-gencode=arch=compute_${n},code=${code}`);
  });
  return flags;
}

/**
 * ptxas -v output → per entry and arch: registers, spills, shared memory, stack. The lines come in this order per
 * function: "Compiling entry function 'NAME' for 'sm_NN'", "Function properties for NAME", "N bytes stack frame,
 * N bytes spill stores, N bytes spill loads", "Used N registers, ..., N bytes smem, ...".
 */
export function parsePtxas(log: string): CudaKernelStats[] {
  const stats: CudaKernelStats[] = [];
  let cur: CudaKernelStats | undefined;
  for (const line of log.split('\n')) {
    const entry = /Compiling entry function '([^']+)' for '(sm_\w+)'/.exec(line);
    if (entry) {
      cur = { name: entry[1]!, arch: entry[2]!, registers: 0, spillBytes: 0, sharedBytes: 0, stackBytes: 0 };
      stats.push(cur);
      continue;
    }
    if (!cur) continue;
    const frame = /(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads/.exec(line);
    if (frame) {
      cur.stackBytes = Number(frame[1]);
      cur.spillBytes = Number(frame[2]) + Number(frame[3]);
      continue;
    }
    const used = /Used (\d+) registers/.exec(line);
    if (used) {
      cur.registers = Number(used[1]);
      const smem = /(\d+) bytes smem/.exec(line);
      cur.sharedBytes = smem ? Number(smem[1]) : 0;
    }
  }
  return stats;
}

export interface CompiledCuda {
  fatbin: Uint8Array;
  version: string;
  stats: CudaKernelStats[];
  /** nvcc's whole output (ptxas -v included). */
  log: string;
  seconds: number;
}

/** Compiles source for archs into a fatbin (one nvcc call, all archs); a PlancError with nvcc's errors on failure. */
export function compileCuda(
  source: string,
  archs: string[],
  opts: { nvcc?: string; keepDir?: string } = {},
): CompiledCuda {
  const nvcc = opts.nvcc ?? findNvcc();
  const version = nvccVersion(nvcc);
  const dir = opts.keepDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'planc-nvcc-'));
  fs.mkdirSync(dir, { recursive: true });
  const cu = path.join(dir, 'plan.cu');
  const out = path.join(dir, 'plan.fatbin');
  fs.writeFileSync(cu, source);
  const args = ['-fatbin', '-O3', '-std=c++17', '-Xptxas', '-v', ...gencodeFlags(archs), '-o', out, cu];
  const t0 = Date.now();
  let keep = opts.keepDir !== undefined;
  try {
    const r = spawnSync(nvcc, args, { encoding: 'utf8', maxBuffer: 256 << 20 });
    const log = `${r.stdout ?? ''}${r.stderr ?? ''}`;
    if (r.error) throw new PlancError('PLANC_E601', `could not run ${nvcc} (${r.error.message}): ${INSTALL}`);
    if (r.status !== 0) {
      keep = true;
      const errors = log
        .split('\n')
        .filter((l) => /error|fatal/i.test(l))
        .slice(0, 20)
        .join('\n');
      throw new PlancError(
        'PLANC_E601',
        `nvcc failed on the generated CUDA (exit ${r.status}; source kept in ${dir}):\n${errors || log.slice(-4000)}`,
      );
    }
    const fatbin = new Uint8Array(fs.readFileSync(out));
    return { fatbin, version, stats: parsePtxas(log), log, seconds: (Date.now() - t0) / 1000 };
  } finally {
    if (!keep) fs.rmSync(dir, { recursive: true, force: true });
  }
}
