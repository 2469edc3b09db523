// The backend table: a plan's target kind → the Backend that loads and runs it (chosen once, at load).
import { PlancError } from '../../compiler/diagnostics.ts';
import type { PlanFile } from '../../compiler/plan/types.ts';
import type { Backend, BackendLoader } from '../backend.ts';
import type { NativeAddon } from '../native.ts';
import { CpuBackend } from './cpu.ts';
import { CudaBackend } from './cuda.ts';

const BACKENDS: Record<string, BackendLoader> = {
  cpu: (native, file, source) => new CpuBackend(native, file, source),
  cuda: (native, file, source) => new CudaBackend(native, file, source),
};

/** Loads the plan onto the backend its target names; a PlancError for a target this runtime has no backend for. */
export function openBackend(native: NativeAddon, file: PlanFile, source: string): Backend {
  const kind = file.header.target.kind;
  const load = Object.hasOwn(BACKENDS, kind) ? BACKENDS[kind] : undefined;
  if (!load)
    throw new PlancError('PLANC_E403', `plan targets ${kind}; this runtime runs cpu and cuda plans`, { file: source });
  return load(native, file, source);
}
