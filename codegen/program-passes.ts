// The ordered list of program passes (optimized IR → plan) and their driver, with the IR passes' dump/verify hooks.
import { Diagnostics, PlancError } from '../compiler/diagnostics.ts';
import type { PassHooks } from '../passes/pipeline.ts';
import type { ProgramPass, ProgramState } from './program-state.ts';
import { selectCpuVariants } from './cpu-variants.ts';
import { buildCuda } from './cuda/build.ts';
import { DEFAULT_ARCHS } from './cuda/nvcc.ts';
import { selectCuda, type Instance } from './cuda/rules.ts';
import { lowerGraph } from './lower.ts';
import { planMemory } from './memory-plan.ts';
import { packPlan, PLANC_VERSION } from './pack.ts';
import { printProgram } from './program-printer.ts';
import { verifyProgramState } from './program-verify.ts';
import { cudaTuningArch } from './target.ts';

export type { ProgramPass, ProgramState } from './program-state.ts';

/** One error naming every node the target cannot lower (op, node name, graph), with the first problem's code. */
function loweringFailure(problems: Diagnostics): PlancError {
  const lines = problems.errors.map(
    (e) =>
      `${e.where.op ?? '?'} '${e.where.node ?? '?'}' in graph ${e.where.graph ?? '?'}: ${e.message.replace(/^PLANC_E\d+: /, '').replace(/ \[[^\]]*\]$/, '')}`,
  );
  if (lines.length === 1) return problems.errors[0]!;
  return new PlancError(problems.errors[0]!.code, `${lines.length} nodes cannot be lowered:\n  ${lines.join('\n  ')}`, {
    stage: 'lowering',
  });
}

const LOWER: ProgramPass = {
  name: 'lower',
  summary: 'each graph → a program of kernel calls over tensors (arena slots sized, not placed; weights shared)',
  run(s) {
    const problems = new Diagnostics();
    for (const [name, g] of s.model.graphs) {
      s.options.onProgress?.(`lowering ${name}`);
      const p = lowerGraph(s.model, g, s.weights, { symbolMax: s.symbolMax }, problems);
      if (problems.ok) s.programs.push(p);
    }
    if (!problems.ok) throw loweringFailure(problems);
  },
};

/** A launch variant's launch as the tuning record and the dumps show it. */
const launchText = (v: Instance) => `${v.template} block ${v.block}${v.maxRows ? ` rows ≤ ${v.maxRows}` : ''}`;

/**
 * A call's tuning choice: its variant names in the order the runtime tries them, then their launches, e.g.
 * `gemv, gemm_tc: planc::gemv<…> block 256 rows ≤ 16 | planc::gemm_tc<…> block 128`.
 */
export const tuningChoice = (vs: Instance[]): string =>
  `${vs.map((v) => v.variant).join(', ')}: ${vs.map(launchText).join(' | ')}`;

/** The variant names a tuning choice records (tuningChoice's prefix). */
export const tuningVariants = (choice: string): string[] => choice.slice(0, choice.indexOf(':')).split(', ');

const SELECT_VARIANTS: ProgramPass = {
  name: 'select-variants',
  summary:
    "cpu: the variant of every call of a kernel with variants (codegen/cpu-variants.ts), in the plan's kernels; " +
    'cuda: the launch variants of every call (codegen/cuda/rules.ts, tuned for codegen/target.ts), in its tuning',
  run(s) {
    const forced = s.options.variants ?? {};
    if (s.options.target !== 'cuda') {
      selectCpuVariants(s.programs, forced);
      return;
    }
    if (Object.keys(forced).length) {
      throw new PlancError(
        'PLANC_E302',
        `variants: kernel variants are the CPU kernels' (cuda launches are chosen by codegen/cuda/rules.ts); got ${Object.keys(forced).join(', ')}`,
      );
    }
    s.options.onProgress?.('selecting CUDA launch variants');
    const arch = cudaTuningArch(s.options.archs ?? DEFAULT_ARCHS);
    s.variants = s.programs.map((p) => p.kernels.map((_, k) => selectCuda(p, k, arch)));
    s.programs.forEach((p, i) =>
      p.kernels.forEach((kern, k) => {
        s.tuning.push({ key: `${p.graph}:${k}:${kern.name}`, choice: tuningChoice(s.variants![i]![k]!), micros: 0 });
      }),
    );
  },
};

const PLAN_MEMORY: ProgramPass = {
  name: 'plan-memory',
  summary: "liveness, in-place reuse and best-fit offsets of every program's arena tensors",
  run(s) {
    for (const p of s.programs) {
      s.options.onProgress?.(`planning memory of ${p.graph}`);
      s.reports.push({ graph: p.graph, kernels: p.kernels.length, tensors: p.tensors.length, ...planMemory(p) });
    }
    s.memoryPlanned = true;
  },
};

const BUILD_CUDA: ProgramPass = {
  name: 'build-cuda',
  summary: 'the chosen variants → one .cu → nvcc → fatbin and launches',
  target: 'cuda',
  run(s) {
    s.cuda = buildCuda(s.programs, s.options.archs ?? DEFAULT_ARCHS, {
      banner: `planc ${PLANC_VERSION} CUDA kernels`,
      onProgress: s.options.onProgress,
      variants: s.variants,
    });
  },
};

const PACK: ProgramPass = {
  name: 'pack',
  summary: 'weights → the aligned blob; the plan header',
  run(s) {
    s.options.onProgress?.('packing weights');
    Object.assign(s, packPlan(s));
  },
};

export const PROGRAM_PASSES: ProgramPass[] = [LOWER, SELECT_VARIANTS, PLAN_MEMORY, BUILD_CUDA, PACK];

/** The programs as text (with the chosen launches once selected): what `--dump-after` prints after a program pass. */
export function printPrograms(s: ProgramState): string {
  return s.programs
    .map((p, i) =>
      printProgram(
        p,
        s.memoryPlanned,
        s.variants && ((k) => s.variants![i]![k]!.map((v) => `launch ${launchText(v)} variant ${v.variant}`)),
      ),
    )
    .join('\n\n');
}

/** Runs the program passes over a fresh state; the state is verified after every pass, and dumped when asked. */
export function runProgramPasses(s: ProgramState, opts: PassHooks = {}): ProgramState {
  for (const pass of PROGRAM_PASSES) {
    if (pass.target && pass.target !== s.options.target) continue;
    opts.onPass?.(pass.name);
    pass.run(s);
    verifyProgramState(s, pass.name);
    if (opts.dumpAfter === pass.name || opts.dumpAfter === 'all') opts.onDump?.(pass.name, printPrograms(s));
  }
  return s;
}
