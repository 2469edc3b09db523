// `planc tune MODEL|PLAN`: tunes a plan's kernel variants on this machine (optimize/tune.ts) with the persisted cache;
// a model is compiled first (as `planc optimize --tune`).
import * as fs from 'node:fs';
import { PlancError } from '../compiler/diagnostics.ts';
import { readPlanFile, writePlanFile } from '../compiler/plan/format.ts';
import { parseArgs, type CommandSpec } from './args.ts';
import { checkOutputFile } from './files.ts';
import { Progress } from './progress.ts';
import { applyThreads } from './threads.ts';
import { OPTIMIZE, runOptimize } from './optimize.ts';
import { tunePlan } from '../optimize/tune.ts';
import { formatTuneReport, TUNE_OPTIONS, tuneRequest } from './tune-options.ts';

export const TUNE: CommandSpec = {
  name: 'tune',
  args: 'MODEL|PLAN',
  summary:
    "Tunes a plan on this machine: every kernel call with variants (the GEMM paths, the quantized products' SIMD paths) is measured with each variant this machine runs, in the plan, at its real sizes (batch 1 and the profile's most rows), and gets the fastest where it beats the default beyond the noise; each graph is then confirmed end to end (a regression is rolled back). Every decision, with its alternatives' times and the reason, is recorded in the plan (planc report shows them). Given a MODEL, compiles it first, with optimize's options.",
  options: {
    ...OPTIMIZE.options,
    output: {
      kind: 'string',
      short: 'o',
      value: 'PLAN',
      help: 'the plan file to write (a MODEL: required; a PLAN: default, the plan itself, rewritten)',
    },
    ...TUNE_OPTIONS,
  },
};

/** Whether a path is a plan file (its magic), not a model. */
const isPlanFile = (f: string): boolean => {
  if (!fs.existsSync(f) || fs.statSync(f).isDirectory()) return false;
  const fd = fs.openSync(f, 'r');
  const b = Buffer.alloc(8);
  fs.readSync(fd, b, 0, 8, 0);
  fs.closeSync(fd);
  return b.toString('latin1') === 'PLANCPLN';
};

export async function runTune(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(TUNE, argv);
  const input = positional[0]!;
  if (!isPlanFile(input)) return runOptimize([...argv, '--tune']);
  const extra = Object.keys(flags).filter(
    (f) => !['output', 'quiet', 'threads', 'debug', ...Object.keys(TUNE_OPTIONS)].includes(f),
  );
  if (extra.length)
    throw new PlancError(
      'PLANC_E301',
      `${extra.map((f) => `--${f}`).join(', ')}: compile options; a plan is tuned as it was compiled (give the model to compile and tune)`,
    );
  const out = (flags.output as string | undefined) ?? input;
  checkOutputFile(out, '-o');
  applyThreads(flags);
  const request = tuneRequest(flags);
  const progress = new Progress(flags.quiet === true);
  progress.start(`reading ${input}`);
  const plan = readPlanFile(input);
  const summary = await tunePlan(plan, request, progress);
  progress.start(`writing ${out}`);
  writePlanFile(out, plan.header, plan.blob);
  progress.finish();
  if (flags.quiet !== true) console.log([`plan ${out}: tuned`, ...formatTuneReport(summary, plan.header)].join('\n'));
  return 0;
}
