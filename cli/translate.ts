// `planc translate PLAN [--strategy NAME] [--jacobi-block N] [--beam N] [--max-length N] [--batch N] [--target-lang CODE] [--truncate] [--ids] < in.txt > out.txt`.
import * as fs from 'node:fs';
import { PlancError } from '../compiler/diagnostics.ts';
import type { DecodingOptions } from '../runtime/decode/options.ts';
import { STRATEGIES } from '../runtime/decode/strategy.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { translateIdsStream, translateStream, type TranslateOptions } from '../runtime/translate.ts';
import type { ProgressBar } from '../passes/pass.ts';
import { parseArgs, type CommandSpec } from './args.ts';
import { Progress } from './progress.ts';

export const TRANSLATE: CommandSpec = {
  name: 'translate',
  usage: `planc translate PLAN [--strategy ${['auto', ...STRATEGIES.keys()].join('|')}] [--jacobi-block N] [--beam N] [--max-length N] [--batch N] [--target-lang CODE] [--truncate] [--ids] [--quiet] < in.txt > out.txt   (--ids: space-separated token ids per line, taken verbatim)`,
  flags: { strategy: 'string', 'jacobi-block': 'number', beam: 'number', 'max-length': 'number', batch: 'number', 'target-lang': 'string', truncate: 'boolean', ids: 'boolean', quiet: 'boolean' },
};

/** Stdin's lines (a final newline does not start another sentence). */
export function readLines(text: string): string[] {
  const lines = text.split(/\r?\n/);
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** One line of `--ids` input: space-separated non-negative integers. */
export function parseIdLine(line: string, lineNo: number): number[] {
  const parts = line.trim().split(/\s+/).filter((p) => p !== '');
  return parts.map((p) => {
    if (!/^\d+$/.test(p)) throw new PlancError('PLANC_E301', `--ids input line ${lineNo}: '${p}' is not a token id (want space-separated integers ≥ 0)`);
    return Number(p);
  });
}

function decodingOptions(flags: Record<string, unknown>): TranslateOptions {
  const o: Partial<DecodingOptions> = {};
  if (flags.strategy !== undefined) o.strategy = String(flags.strategy);
  if (flags['jacobi-block'] !== undefined) o.jacobiBlock = flags['jacobi-block'] as number;
  if (flags.beam !== undefined) o.beamSize = flags.beam as number;
  if (flags['max-length'] !== undefined) o.maxLength = flags['max-length'] as number;
  if (flags.batch !== undefined) o.batchSize = flags.batch as number;
  if (flags['target-lang'] !== undefined) o.targetLang = String(flags['target-lang']);
  if (flags.truncate === true) o.truncate = true;
  return o;
}

/** Tokens generated and lines that failed alone (an empty output line each, the error on stderr with its line number). */
interface Counts { tokens: number; failed: number }

function report(r: { index: number; error?: Error }, out: string, counts: Counts, bar: ProgressBar): void {
  if (r.error) {
    counts.failed++;
    process.stderr.write(`planc translate: line ${r.index + 1}: ${r.error.message}\n`);
  }
  process.stdout.write(`${out}\n`);
  bar.tick(1);
}

async function translateTextLines(plan: Plan, lines: string[], o: TranslateOptions, bar: ProgressBar): Promise<Counts> {
  const counts = { tokens: 0, failed: 0 };
  for await (const r of translateStream(plan, lines, o)) {
    counts.tokens += r.tokens;
    report(r, r.text, counts, bar);
  }
  return counts;
}

async function translateIdLines(plan: Plan, lines: string[], o: TranslateOptions, bar: ProgressBar): Promise<Counts> {
  const counts = { tokens: 0, failed: 0 };
  const sources = lines.map((l, i) => parseIdLine(l, i + 1));
  for await (const r of translateIdsStream(plan, sources, o)) {
    counts.tokens += r.ids.length;
    report(r, r.ids.join(' '), counts, bar);
  }
  return counts;
}

export async function runTranslate(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(TRANSLATE, argv);
  const planFile = positional[0]!;
  const options = decodingOptions(flags);
  const lines = readLines(fs.readFileSync(0, 'utf8'));
  const plan = await loadPlan(planFile);
  try {
    return await translateLines(plan, lines, options, flags.ids === true, flags.quiet === true);
  } finally {
    plan.close();
  }
}

async function translateLines(plan: Plan, lines: string[], options: TranslateOptions, ids: boolean, quiet: boolean): Promise<number> {
  const bar = new Progress(quiet).bar('translating', lines.length);
  const t0 = performance.now();
  const { tokens, failed } = ids ? await translateIdLines(plan, lines, options, bar) : await translateTextLines(plan, lines, options, bar);
  bar.done();
  const s = Math.max((performance.now() - t0) / 1000, 1e-9);
  if (!quiet) process.stderr.write(`translated ${lines.length} sentences in ${s.toFixed(2)} s: ${(lines.length / s).toFixed(1)} sentences/s, ${(tokens / s).toFixed(0)} tokens/s\n`);
  if (failed > 0) process.stderr.write(`planc translate: ${failed} of ${lines.length} lines failed (empty output lines)\n`);
  return failed > 0 ? 2 : 0;
}
