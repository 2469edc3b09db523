// select-variants on cpu: the variant of every kernel call that has variants — the one the caller forces, one that is
// provably what `auto` does on every machine, or `auto` (the kernel decides at run time).
import { PlancError } from '../compiler/diagnostics.ts';
import { GEMM_AUTO, GEMM_VARIANTS, kernelVariants } from '../compiler/kernel-schema.ts';
import type { PlanKernel, PlanProgram } from '../compiler/plan/types.ts';
import { constExpr } from '../compiler/plan/expr.ts';
import { runsEverywhere } from './target.ts';

/**
 * Variants the caller forces (BuildOptions.variants): keyed by kernel name (every call of it) or by IR node name (the
 * calls lowered from that node; a node's entry wins over its kernel's). Tests and benchmarks use it; a variant with
 * machine needs (blas, avx512) makes a plan that loads only where they are met.
 */
export type VariantChoices = Readonly<Record<string, string>>;

/** The rows of a tensor (all its dims but the last multiplied) when every one is known at optimize time. */
function fixedRows(p: PlanProgram, tensor: number): number | undefined {
  const dims = p.tensors[tensor]!.dims.slice(0, -1).map((e) => constExpr(p, e));
  return dims.reduce<number | undefined>((n, d) => (n === undefined || d === undefined ? undefined : n * d), 1);
}

/**
 * The variant `auto` takes on every machine and build for a call, when one is certain at optimize time: a matrix
 * product (GEMM_VARIANTS) whose output has a fixed number of rows ≤ GEMM_AUTO.gemvEverywhereMaxM runs GEMV, since
 * every product it makes has M ≤ those rows (batched or folded alike) and gemm.cc's rule takes GEMV there whatever
 * the CPU, the BLAS and B's layout. Fixing it changes nothing at run time; it makes the plan say what runs.
 */
export function autoEverywhere(p: PlanProgram, k: PlanKernel): string | undefined {
  if (kernelVariants(k.name) !== GEMM_VARIANTS || k.outputs.length === 0) return undefined;
  const rows = fixedRows(p, k.outputs[0]!);
  return rows !== undefined && rows <= GEMM_AUTO.gemvEverywhereMaxM ? 'gemv' : undefined;
}

const optionError = (msg: string) => new PlancError('PLANC_E302', `variants: ${msg}`, { stage: 'select-variants' });

/** Every key names a kernel with variants or a node lowered to one, and every value is a variant of those kernels. */
function checkChoices(programs: PlanProgram[], choices: VariantChoices): void {
  for (const [key, variant] of Object.entries(choices)) {
    const calls = programs
      .flatMap((p) => p.kernels)
      .filter((k) => (k.name === key || k.node === key) && kernelVariants(k.name).length);
    if (!calls.length) {
      const kernels = [
        ...new Set(
          programs
            .flatMap((p) => p.kernels)
            .map((k) => k.name)
            .filter((n) => kernelVariants(n).length),
        ),
      ];
      throw optionError(
        `'${key}' is neither a kernel with variants nor a node lowered to one (kernels with variants here: ${kernels.join(', ') || 'none'})`,
      );
    }
    for (const k of calls) {
      const names = kernelVariants(k.name).map((v) => v.name);
      if (!names.includes(variant))
        throw optionError(`${key}: kernel '${k.name}' has no variant '${variant}' (its variants: ${names.join(', ')})`);
    }
  }
}

/** Sets the variant of every cpu kernel call that has variants; fails (PLANC_E302) on choices that name nothing. */
export function selectCpuVariants(programs: PlanProgram[], choices: VariantChoices = {}): void {
  checkChoices(programs, choices);
  for (const p of programs) {
    for (const k of p.kernels) {
      const variants = kernelVariants(k.name);
      if (!variants.length) continue;
      const fixed = autoEverywhere(p, k);
      if (fixed !== undefined && !runsEverywhere(variants.find((v) => v.name === fixed)!))
        throw new Error(`internal: ${k.name} variant ${fixed} is not portable`);
      k.variant = choices[k.node] ?? choices[k.name] ?? fixed ?? 'auto';
    }
  }
}
