// The CUDA step of optimize: kernels for every program of a plan → one .cu → nvcc → the plan's CudaCode.
import { PlancError } from '../../compiler/diagnostics.ts';
import type { PlanCuda, PlanProgram } from '../../compiler/plan/types.ts';
import { generateCuda } from './generate.ts';
import type { Instance } from './rules.ts';
import { compileCuda, findNvcc } from './nvcc.ts';

export interface CudaBuild {
  cuda: PlanCuda;
  archs: string[];
  /** nvcc's log (ptxas -v), for --explain and debugging. */
  log: string;
  seconds: number;
}

/**
 * Generates and compiles the kernels of programs for archs. nvcc is looked up first, so a machine without it fails
 * before any work; a kernel without a CUDA template fails naming its node; ptxas spills are refused unless allowed.
 */
export function buildCuda(
  programs: PlanProgram[],
  archs: string[],
  opts: {
    banner: string;
    onProgress?: (s: string) => void;
    allowSpills?: boolean;
    keepDir?: string;
    /** The launch variants chosen per program and call (the select-variants program pass); selected here when absent. */
    variants?: Instance[][][];
  },
): CudaBuild {
  const nvcc = findNvcc();
  opts.onProgress?.('generating CUDA kernels');
  const gen = generateCuda(programs, opts.banner, opts.variants);
  opts.onProgress?.(`nvcc: ${gen.entries.length} kernels for ${archs.join(', ')}`);
  const c = compileCuda(gen.source, archs, { nvcc, keepDir: opts.keepDir });
  const missing = gen.entries.filter((e) => !c.stats.some((s) => s.name === e.name));
  if (missing.length)
    throw new PlancError(
      'PLANC_E601',
      `ptxas -v reported nothing for ${missing.map((e) => e.name).join(', ')} (is ${nvcc} a working nvcc?)`,
    );
  const spills = c.stats.filter((s) => s.spillBytes > 0);
  if (spills.length && !opts.allowSpills) {
    throw new PlancError(
      'PLANC_E601',
      `register spills in the generated CUDA: ${spills.map((s) => `${s.name} on ${s.arch}: ${s.spillBytes} bytes`).join('; ')} (a tile shape too large for the register file)`,
    );
  }
  return {
    cuda: {
      fatbin: c.fatbin,
      source: gen.source,
      nvccVersion: c.version,
      kernels: c.stats,
      programs: gen.programs,
      scratchBytes: gen.scratchBytes,
    },
    archs,
    log: c.log,
    seconds: c.seconds,
  };
}
