// `planc translate PLAN [-i IN] [-o OUT] [options]`: streams lines through a plan; translations in input order as they are ready.
import * as fs from 'node:fs';
import { PlancError } from '../compiler/diagnostics.ts';
import { earlyStoppingOf, validateDecodingOptions, type DecodingOptions } from '../runtime/decode/options.ts';
import { STRATEGIES } from '../runtime/decode/strategy.ts';
import { planDefaults, tooLong, translateIds, type TranslationResult } from '../runtime/decode/translate-ids.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import type { Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { planTokenizer, sourceIds } from '../runtime/translate.ts';
import { intOption, parseArgs, type CommandSpec, type Parsed } from './args.ts';
import { ddgvizRecorder } from './ddgviz.ts';
import { checkInputFile, checkOutputFile } from './files.ts';
import { InvalidLine, LineChunks } from './line-chunks.ts';
import { cliOptionError, withFlagNames } from './option-errors.ts';
import { applyThreads, THREADS_OPTION } from './threads.ts';
import { applyDevice } from '../runtime/backends/cudasim.ts';

export const TRANSLATE: CommandSpec = {
  name: 'translate',
  args: 'PLAN',
  summary:
    'Translates text with a plan: one sentence per line from standard input (or --input FILE), one translation per line to standard output (or --output FILE), in input order. The plan and its tokenizer are opened and checked before any input is read. Input is streamed: lines are translated as batches fill, or as soon as the input pauses, so a pipe gets each answer once its batch is done; an empty line gives an empty line, a line that fails gives an empty line and a message on standard error naming the line, and the exit status is then 2.',
  options: {
    input: {
      kind: 'string',
      short: 'i',
      value: 'FILE',
      help: 'read the sentences from FILE instead of standard input',
    },
    output: {
      kind: 'string',
      short: 'o',
      value: 'FILE',
      help: 'write the translations to FILE instead of standard output (its folder must exist)',
    },
    strategy: {
      kind: 'string',
      value: 'NAME',
      help: `decoding strategy: ${['auto', ...STRATEGIES.keys()].join(', ')} (default auto: greedy for beam 1, else beam; pj/pgj/hgj give greedy's output by parallel Jacobi steps on a multi-token-step plan (the cpu default), lookup by verifying n-grams copied from the source or the output so far)`,
    },
    'jacobi-block': {
      kind: 'number',
      value: 'N',
      help: 'block size of the pgj and hgj strategies: tokens one decoder step refines (default 3)',
    },
    chunk: {
      kind: 'number',
      value: 'K',
      help: "--strategy hrt: the chunk size k (Skip-AT every k-th token, one Skip-CMLM pass fills the rest; 1 = plain autoregressive with the HRT model); one of the plan's HRT chunk sizes (default: its smallest above 1)",
    },
    'nat-beams': {
      kind: 'number',
      value: 'N',
      help: "--strategy hrt with --beam B: the best N ≤ B Skip-AT hypotheses the Skip-CMLM pass fills; the output is the best by the sum of both stages' log-probs (default B)",
    },
    beam: {
      kind: 'number',
      value: 'N',
      help: "generate()'s num_beams: beam size, 1 = greedy (default: the plan's num_beams, else 1; at least --n-best)",
    },
    'early-stopping': {
      kind: 'string',
      value: 'true|false|never',
      help: "generate()'s early_stopping: when beam search is done with a sentence: true = once it has --beam finished hypotheses; false = once no running beam, scored at its current length, can beat the worst of them; never = the same scored at --max-length when --length-penalty > 0 (default: the plan's early_stopping, else false)",
    },
    'n-best': {
      kind: 'number',
      value: 'N',
      help: "generate()'s num_return_sequences: print the N best translations of each line in the n-best format below (implies --scores; the beam is widened to N when --beam is not given)",
    },
    scores: { kind: 'boolean', help: "print each translation's score after it: TEXT ||| SCORE (see below)" },
    'length-penalty': {
      kind: 'number',
      value: 'X',
      help: "generate()'s length_penalty: alpha in [-10, 10]; a finished hypothesis scores (sum of its token log-probs) / length^alpha, length counting its eos; 0 = raw sum (default: the plan's length_penalty, else 1)",
    },
    'max-length': {
      kind: 'number',
      value: 'N',
      help: "generate()'s max_new_tokens: cap on generated tokens per sentence, its eos included (default: the plan's max_new_tokens, or max_length - 1, else 256; always within the plan's --max-tgt-len)",
    },
    'no-repeat-ngram-size': {
      kind: 'number',
      value: 'N',
      help: "generate()'s no_repeat_ngram_size: no N-gram occurs twice in an output (default: the plan's, else 0 = off)",
    },
    'encoder-no-repeat-ngram-size': {
      kind: 'number',
      value: 'N',
      help: "generate()'s encoder_no_repeat_ngram_size: no N-gram of the source ids occurs in an output (default: the plan's, else 0 = off)",
    },
    'repetition-penalty': {
      kind: 'number',
      value: 'X',
      help: "generate()'s repetition_penalty: scores of tokens already output × X when negative, else ÷ X (beam: log-probs; greedy: logits, on a --topk 0 plan); default: the plan's, else 1 = off",
    },
    'min-new-tokens': {
      kind: 'number',
      value: 'N',
      help: "generate()'s min_new_tokens: no eos before N generated tokens (default: the plan's min_new_tokens or min_length - 1, else 0)",
    },
    'do-sample': {
      kind: 'string',
      value: 'true|false',
      help: "generate()'s do_sample: true draws each token from the processed distribution (generate()'s sample mode, with --beam 1; after the processors above come --temperature, --top-k, --top-p) instead of taking the best; each line samples from its own random stream (--seed, its line number), whatever else is in its batch (default: the plan's do_sample, else false)",
    },
    temperature: {
      kind: 'number',
      value: 'X',
      help: "generate()'s temperature: with --do-sample true, the scores are divided by X > 0 (default: the plan's, else 1)",
    },
    'top-k': {
      kind: 'number',
      value: 'N',
      help: "generate()'s top_k: with --do-sample true, sample among the N best tokens, 0 = all (default: the plan's, else 50; a top-k plan needs N + the ids a step may ban < its --topk)",
    },
    'top-p': {
      kind: 'number',
      value: 'X',
      help: "generate()'s top_p: with --do-sample true, sample among the fewest best tokens whose probability reaches X in (0, 1] (default: the plan's, else 1 = all)",
    },
    seed: {
      kind: 'number',
      value: 'N',
      help: 'the random seed of --do-sample: the same seed, input and options give the same output (default 0; an integer in [0, 2^53 - 1])',
    },
    batch: {
      kind: 'number',
      value: 'N',
      help: "sentences per batch (default 32, capped by the plan's --max-batch / beam)",
    },
    'batch-tokens': {
      kind: 'number',
      value: 'N',
      help: 'cut batches by tokens instead: sentences × longest source ≤ N (a longer sentence goes alone); default off',
    },
    'target-lang': {
      kind: 'string',
      value: 'CODE',
      help: "replaces generate()'s forced_bos_token_id: force this target language token (its name in the plan's tokenizer: en_XX, __en__, eng_Latn, ...) as the first generated token",
    },
    truncate: {
      kind: 'boolean',
      help: "cut sources over the plan's --max-src-len to fit (keeping their final eos) instead of failing those lines",
    },
    ids: {
      kind: 'boolean',
      help: 'input and output lines are token ids, space-separated integers, taken verbatim (no tokenizer needed)',
    },
    ddgviz: {
      kind: 'string',
      value: 'FILE',
      help: 'also write the DDGviz page of the run (parallel Jacobi strategies only: --strategy pj, pgj or hgj) to FILE',
    },
    quiet: { kind: 'boolean', help: 'no speed summary on standard error at the end' },
    threads: THREADS_OPTION,
    device: {
      kind: 'string',
      value: 'sim',
      help: 'sim: run a cuda plan on the emulated CUDA device (native/cudasim, on the CPU: slow, for checking kernels; as PLANC_DEVICE=sim)',
    },
  },
  notes: `Output formats. By default each input line gives one line: its translation. With --scores: TEXT ||| SCORE, where SCORE is the hypothesis' length-penalized log-probability (generate()'s sequences_scores; see --length-penalty; higher is better; a failed line gives -inf). With --n-best N (Marian's n-best format): up to N lines per input line, best first, each
  INDEX ||| TEXT ||| SCORE
where INDEX is the input line's number counting from 0; a failed or empty line gives one line with an empty text. With --ids, TEXT is the output token ids, space-separated.
Only --n-best changes the number of output lines; otherwise the output has exactly as many lines as the input.`,
};

/** How long input may pause before the lines read so far are translated without waiting for a full batch. */
const IDLE_MS = 25;
/** The most lines handed to one translateIds call (it sorts them by length and batches within them). */
const MAX_CHUNK = 256;

/** One line of `--ids` input: space-separated non-negative integers. */
export function parseIdLine(line: string, lineNo: number): number[] {
  const parts = line
    .trim()
    .split(/\s+/)
    .filter((p) => p !== '');
  return parts.map((p) => {
    if (!/^\d+$/.test(p))
      throw new PlancError(
        'PLANC_E301',
        `--ids input line ${lineNo}: '${p}' is not a token id (want space-separated integers ≥ 0)`,
      );
    return Number(p);
  });
}

/** What the output looks like (see TRANSLATE.notes). */
interface OutputFormat {
  nBest: number;
  scores: boolean;
}

function decodingOptions(flags: Parsed['flags'], plan: Plan, format: OutputFormat): Partial<DecodingOptions> {
  const o: Partial<DecodingOptions> = {};
  if (flags.strategy !== undefined) o.strategy = String(flags.strategy);
  if (flags['jacobi-block'] !== undefined) o.jacobiBlock = flags['jacobi-block'] as number;
  if (flags.chunk !== undefined) o.chunk = flags.chunk as number;
  if (flags['nat-beams'] !== undefined) o.natBeams = flags['nat-beams'] as number;
  if (flags.beam !== undefined) {
    o.beamSize = flags.beam as number;
    if (format.nBest > o.beamSize)
      throw new PlancError(
        'PLANC_E301',
        `--n-best ${format.nBest} needs a beam of at least ${format.nBest} (--beam ${o.beamSize} keeps fewer hypotheses)`,
      );
  } else if (format.nBest > 1) o.beamSize = Math.max(format.nBest, planDefaults(plan).beamSize ?? 1);
  if (flags['length-penalty'] !== undefined) o.lengthPenalty = flags['length-penalty'] as number;
  if (flags['max-length'] !== undefined) o.maxLength = flags['max-length'] as number;
  if (flags['min-new-tokens'] !== undefined) o.minNewTokens = flags['min-new-tokens'] as number;
  if (flags['no-repeat-ngram-size'] !== undefined) o.noRepeatNgramSize = flags['no-repeat-ngram-size'] as number;
  if (flags['encoder-no-repeat-ngram-size'] !== undefined)
    o.encoderNoRepeatNgramSize = flags['encoder-no-repeat-ngram-size'] as number;
  if (flags['repetition-penalty'] !== undefined) o.repetitionPenalty = flags['repetition-penalty'] as number;
  if (flags['early-stopping'] !== undefined) o.earlyStopping = earlyStoppingFlag(String(flags['early-stopping']));
  if (flags['do-sample'] !== undefined) o.doSample = booleanFlag('do-sample', String(flags['do-sample']));
  if (flags.temperature !== undefined) o.temperature = flags.temperature as number;
  if (flags['top-k'] !== undefined) o.topK = flags['top-k'] as number;
  if (flags['top-p'] !== undefined) o.topP = flags['top-p'] as number;
  if (flags.seed !== undefined) o.seed = flags.seed as number;
  if (flags.batch !== undefined) o.batchSize = flags.batch as number;
  if (flags['batch-tokens'] !== undefined) o.batchTokens = flags['batch-tokens'] as number;
  if (flags['target-lang'] !== undefined) o.targetLang = String(flags['target-lang']);
  if (flags.truncate === true) o.truncate = true;
  if (format.scores) o.returnScores = true;
  if (format.nBest > 0) o.returnAlternatives = format.nBest;
  return o;
}

/** --early-stopping's value: true, false or never (generate()'s early_stopping), else PLANC_E301. */
function earlyStoppingFlag(v: string): boolean | 'never' {
  if (v === 'true' || v === 'false' || v === 'never') return earlyStoppingOf(v);
  throw new PlancError('PLANC_E301', `--early-stopping ${v}: it must be true, false or never`);
}

/** A true|false flag's value, else PLANC_E301. */
function booleanFlag(name: string, v: string): boolean {
  if (v === 'true' || v === 'false') return v === 'true';
  throw new PlancError('PLANC_E301', `--${name} ${v}: it must be true or false`);
}

/** One input line's outcome: its result, or the error it failed with alone. */
type LineResult = { result: TranslationResult; error?: undefined } | { result?: undefined; error: Error };

/** The lines one result prints (TRANSLATE.notes). */
function formatLines(index: number, r: LineResult, format: OutputFormat, text: (ids: number[]) => string): string[] {
  const score = (s: number | undefined) => (s === undefined ? '-inf' : s.toFixed(6));
  if (format.nBest > 0) {
    if (!r.result) return [`${index} |||  ||| -inf`];
    const hyps = r.result.alternatives ?? [{ ids: r.result.ids, score: r.result.score ?? 0 }];
    return hyps.map((h) => `${index} ||| ${text(h.ids)} ||| ${score(h.score)}`);
  }
  const t = r.result ? text(r.result.ids) : '';
  return [format.scores ? `${t} ||| ${score(r.result?.score)}` : t];
}

/** Where translations go: standard output, or a file written as they come. */
function openOutput(file: string | undefined): { write(s: string): void; close(): void } {
  if (file === undefined)
    return {
      write: (s) => {
        process.stdout.write(s);
      },
      close: () => {},
    };
  const fd = fs.openSync(file, 'w');
  return {
    write: (s) => {
      fs.writeSync(fd, s);
    },
    close: () => fs.closeSync(fd),
  };
}

/**
 * Translates one chunk of lines, the first being input line `first` (counting from 0: with --do-sample a line samples
 * from the stream of its number, so chunking does not change the output); a line that fails alone gets its error,
 * the others their results.
 */
async function translateChunk(
  plan: Plan,
  sources: (number[] | Error)[],
  o: Partial<DecodingOptions>,
  first: number,
): Promise<LineResult[]> {
  const ok = sources.flatMap((s, i) => (s instanceof Error ? [] : [i]));
  const out: LineResult[] = sources.map((s) =>
    s instanceof Error ? { error: s } : { error: new Error('not translated') },
  );
  try {
    const results = await translateIds(
      plan,
      ok.map((i) => sources[i] as number[]),
      { ...o, sampleIndices: ok.map((i) => first + i) },
    );
    ok.forEach((i, j) => {
      out[i] = { result: results[j]! };
    });
  } catch (e) {
    if (ok.length <= 1) {
      if (ok.length) out[ok[0]!] = { error: e as Error };
      return out;
    }
    // find the line at fault: each alone (the rest still translate)
    for (const i of ok) out[i] = (await translateChunk(plan, [sources[i]!], o, first + i))[0]!;
  }
  return out;
}

export async function runTranslate(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(TRANSLATE, argv);
  const nBest = intOption(flags, 'n-best', 1, 64) ?? 0;
  const format: OutputFormat = { nBest, scores: flags.scores === true || nBest > 0 };
  const input = flags.input as string | undefined;
  const output = flags.output as string | undefined;
  if (input !== undefined) checkInputFile(input, '--input');
  if (output !== undefined) checkOutputFile(output, '--output');
  applyThreads(flags);
  applyDevice(flags.device as string | undefined);
  // the plan, its tokenizer and the options are checked before any input is read
  const plan = await loadPlan(positional[0]!);
  try {
    const ids = flags.ids === true;
    const tok = ids ? undefined : await planTokenizer(plan);
    const options = decodingOptions(flags, plan, format);
    const ddgviz = flags.ddgviz === undefined ? undefined : ddgvizRecorder(String(flags.ddgviz), options);
    // every option, and whether this plan can run them (a Jacobi strategy's step tokens, beams within its rows), is
    // checked here, once, before input is read; errors name the flags
    const v = await withFlagNames(async () => {
      await translateIds(plan, [], options);
      return validateDecodingOptions(options, planDefaults(plan));
    });
    // a chunk is ready once it fills a batch (sentences × beams within the plan's maxBatch), or when input pauses
    const batch = Math.max(1, Math.min(v.batchSize, Math.floor(plan.header.profile.maxBatch / v.beamSize), MAX_CHUNK));
    const lines = new LineChunks(input === undefined ? process.stdin : fs.createReadStream(input), {
      full: batch,
      max: MAX_CHUNK,
      idleMs: IDLE_MS,
    });
    const out = openOutput(output);
    try {
      const run: Run = { tok, options, format, drawn: ddgviz && { sources: [], texts: [] }, out };
      const counts = await translateLines(plan, lines, run);
      if (ddgviz && run.drawn) await ddgviz.write(plan, run.drawn.sources, tok ? run.drawn.texts : undefined);
      return report(counts, flags.quiet === true);
    } finally {
      lines.close();
      out.close();
    }
  } finally {
    plan.close();
  }
}

interface Run {
  tok: Tokenizer | undefined;
  options: Partial<DecodingOptions>;
  format: OutputFormat;
  /** With --ddgviz: every line's source ids and text, for the page. */
  drawn: { sources: number[][]; texts: string[] } | undefined;
  out: { write(s: string): void };
}

interface Counts {
  lines: number;
  tokens: number;
  failed: number;
  seconds: number;
}

/** Reads chunks of lines, translates each, writes its results in order; a line that fails is an empty line and a message. */
async function translateLines(plan: Plan, lines: LineChunks, run: Run): Promise<Counts> {
  const { tok, options, format } = run;
  const max = plan.header.profile.maxSrcLen;
  const counts: Counts = { lines: 0, tokens: 0, failed: 0, seconds: 0 };
  const t0 = performance.now();
  const text = (ids: number[]) => (tok ? tok.decode(ids) : ids.join(' '));
  for (let chunk = await lines.next(); chunk; chunk = await lines.next()) {
    const first = counts.lines;
    const sources = chunk.map((line, k): number[] | Error => {
      if (line instanceof InvalidLine)
        return new PlancError(
          'PLANC_E012',
          `the line (${line.bytes} bytes) is not valid UTF-8 text; planc translate reads UTF-8`,
        );
      try {
        const s = tok ? sourceIds(tok, line, options.truncate ? max : undefined) : parseIdLine(line, first + k + 1);
        if (!options.truncate && s.length > max) return tooLong('the source', s.length, max);
        return s;
      } catch (e) {
        return e as Error;
      }
    });
    if (run.drawn) {
      run.drawn.sources.push(...sources.map((s) => (s instanceof Error ? [] : s)));
      run.drawn.texts.push(...chunk.map((line) => (line instanceof InvalidLine ? '' : line)));
    }
    const results = await translateChunk(plan, sources, options, first);
    let block = '';
    results.forEach((r, k) => {
      if (r.error) {
        counts.failed++;
        process.stderr.write(`planc translate: line ${first + k + 1}: ${(cliOptionError(r.error) as Error).message}\n`);
      } else counts.tokens += r.result.ids.length;
      block += `${formatLines(first + k, r, format, text).join('\n')}\n`;
    });
    run.out.write(block);
    counts.lines += chunk.length;
  }
  counts.seconds = Math.max((performance.now() - t0) / 1000, 1e-9);
  return counts;
}

/** The summary on standard error; the exit status (2 when a line failed). */
function report(c: Counts, quiet: boolean): number {
  const ok = c.lines - c.failed; // the failed lines are not counted as translated, nor in the rate
  if (!quiet)
    process.stderr.write(
      `translated ${ok} sentence${ok === 1 ? '' : 's'}${c.failed > 0 ? ` (${c.failed} failed)` : ''} in ${c.seconds.toFixed(2)} s: ${(ok / c.seconds).toFixed(1)} sentences/s, ${(c.tokens / c.seconds).toFixed(0)} tokens/s\n`,
    );
  if (c.failed > 0)
    process.stderr.write(`planc translate: ${c.failed} of ${c.lines} lines failed (empty output lines)\n`);
  return c.failed > 0 ? 2 : 0;
}
