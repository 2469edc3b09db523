// `planc ddgviz PLAN --src FILE [-o FILE.html]`, and `planc translate --ddgviz FILE.html`: Jacobi decodes drawn as DDGviz pages.
import * as fs from 'node:fs';
import { PlancError } from '../compiler/diagnostics.ts';
import { renderDdgviz } from '../pages/ddgviz.ts';
import { JacobiTraceCollector } from '../runtime/decode/jacobi-trace.ts';
import type { DecodingOptions } from '../runtime/decode/options.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { withFlagNames } from './option-errors.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import type { Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { planTokenizer, sourceIds } from '../runtime/translate.ts';
import { intOption, parseArgs, type CommandSpec } from './args.ts';
import { checkInputFile, checkOutputFile } from './files.ts';
import { applyThreads, THREADS_OPTION } from './threads.ts';
import { readLines } from './read-lines.ts';

const JACOBI = ['pj', 'pgj', 'hgj'];

export const DDGVIZ: CommandSpec = {
  name: 'ddgviz',
  args: 'PLAN',
  summary:
    'Decodes the first sentences of a text file with a parallel Jacobi strategy (pj, pgj or hgj; the plan needs multi-token steps: the cpu default) and writes DDGviz, one self-contained HTML page: per sentence, the tokens coloured by the iteration that fixed them, the draft at every iteration and the decoding dependency graph (which tokens waited for which), with the totals (iterations vs tokens).',
  options: {
    src: { kind: 'string', value: 'FILE', help: 'the source text, one sentence per line' },
    output: { kind: 'string', short: 'o', value: 'FILE', help: 'the page to write (default ddgviz.html)' },
    strategy: { kind: 'string', value: 'NAME', help: 'pj, pgj or hgj (default pgj)' },
    'jacobi-block': { kind: 'number', value: 'N', help: 'block size b of pgj and hgj (default 3, as in the paper)' },
    limit: { kind: 'number', value: 'N', help: 'sentences drawn: the first N lines of --src (default 20)' },
    batch: {
      kind: 'number',
      value: 'N',
      help: 'sentences per batch (default 1: each sentence iterates alone; in a batch, rows share decoder runs)',
    },
    'max-length': { kind: 'number', value: 'N', help: "cap on generated tokens per sentence (default: the plan's)" },
    threads: THREADS_OPTION,
  },
  notes:
    "Sources over the plan's maxSrcLen are cut to fit. planc translate --ddgviz FILE.html draws the sentences of a translation run instead.",
};

/** Refuses --ddgviz (or planc ddgviz) with a strategy that is not a Jacobi one. */
export function checkDdgvizStrategy(strategy: string | undefined, option: string): void {
  if (strategy === undefined || !JACOBI.includes(strategy)) {
    throw new PlancError(
      'PLANC_E301',
      `${option} draws parallel Jacobi decoding: use it with --strategy pj, pgj or hgj (got ${strategy === undefined ? 'the default, greedy/beam' : `'${strategy}'`})`,
    );
  }
}

/** The plan's tokenizer, or undefined when it has none (the page then shows ids). */
async function tokenizerOf(plan: Plan): Promise<Tokenizer | undefined> {
  try {
    return await planTokenizer(plan);
  } catch {
    return undefined;
  }
}

/** A token's text piece by id through a tokenizer (a leading space marks a word start; eos and pad by name). */
export function tokenTexts(plan: Plan, tok: Tokenizer): (id: number) => string {
  const d = plan.header.decoding;
  const ref = tok.encode('a');
  const refText = tok.decode(ref);
  const cache = new Map<number, string>();
  return (id) => {
    let s = cache.get(id);
    if (s === undefined) {
      if (id === d.eosId) s = '</s>';
      else if (id === d.padId) s = '<pad>';
      else {
        const after = tok.decode([...ref, id]); // a piece's leading space shows only after another token
        s = after.startsWith(refText) ? after.slice(refText.length) : tok.decode([id]);
      }
      cache.set(id, s);
    }
    return s;
  };
}

export interface DdgvizRecorder {
  /** Writes the page for these sources (ids in input order; texts shown when given); returns the sentences drawn. */
  write(plan: Plan, sources: number[][], texts?: string[]): Promise<number>;
}

/**
 * Collects the traces of a decode into a DDGviz page: `options` gets the trace listener; `write` matches the traces to
 * the sources (their ids in input order, their texts when known) and writes the page; returns the sentences drawn.
 */
export function ddgvizRecorder(file: string, options: Partial<DecodingOptions>, option = '--ddgviz'): DdgvizRecorder {
  checkDdgvizStrategy(options.strategy, option);
  checkOutputFile(file, option);
  const collector = new JacobiTraceCollector();
  options.jacobiTrace = collector.listener;
  return {
    async write(plan, sources, texts) {
      const traces = collector.inInputOrder(sources);
      const shown = traces.flatMap((t, i) => (t ? [i] : []));
      const tok = await tokenizerOf(plan);
      const page = renderDdgviz(
        shown.map((i) => traces[i]!),
        {
          title: 'DDGviz',
          plan: plan.source,
          batchSize: options.batchSize,
          tokenText: tok && tokenTexts(plan, tok),
          sources: texts ? shown.map((i) => texts[i]) : shown.map((i) => sources[i]!.join(' ')),
          translations: tok && shown.map((i) => tok.decode(traces[i]!.tokens)),
        },
      );
      fs.writeFileSync(file, page);
      return shown.length;
    },
  };
}

export async function runDdgviz(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(DDGVIZ, argv);
  const src = flags.src as string | undefined;
  if (src === undefined)
    throw new PlancError('PLANC_E301', 'planc ddgviz needs --src FILE (the source text, one sentence per line)');
  checkInputFile(src, '--src');
  const out = (flags.output as string | undefined) ?? 'ddgviz.html';
  const o: Partial<DecodingOptions> = {
    strategy: (flags.strategy as string | undefined) ?? 'pgj',
    batchSize: intOption(flags, 'batch', 1, 65536) ?? 1,
    truncate: true,
  };
  const block = intOption(flags, 'jacobi-block', 1, 256);
  if (block !== undefined) o.jacobiBlock = block;
  const maxLength = intOption(flags, 'max-length', 1, 65536);
  if (maxLength !== undefined) o.maxLength = maxLength;
  const limit = intOption(flags, 'limit', 1, 100000) ?? 20;
  const recorder = ddgvizRecorder(out, o, 'planc ddgviz');
  applyThreads(flags);
  const texts = readLines(fs.readFileSync(src, 'utf8')).slice(0, limit);
  const plan = await loadPlan(positional[0]!);
  try {
    const tok = await planTokenizer(plan, 'planc ddgviz reads text');
    const ids = texts.map((t) => sourceIds(tok, t, plan.header.profile.maxSrcLen));
    await withFlagNames(() => translateIds(plan, ids, o));
    const n = await recorder.write(plan, ids, texts);
    process.stderr.write(`planc ddgviz: wrote ${out} (${n} sentence${n === 1 ? '' : 's'}, strategy ${o.strategy})\n`);
    return 0;
  } finally {
    plan.close();
  }
}
