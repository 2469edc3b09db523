// One request's or job's texts through a model's scheduler: tokenized, submitted, each answered at its own index (a
// sentence that fails does so alone, with its PLANC code). Shared by the HTTP route and the queue worker.
import { PlancError } from '../compiler/diagnostics.ts';
import type { DecodingOptions } from '../runtime/decode/options.ts';
import type { SentenceOutcome } from '../runtime/decode/scheduler.ts';
import { sourceIds } from '../runtime/translate.ts';
import { publicMessage } from './errors.ts';
import type { ServedModel } from './models.ts';

/** One sentence's answer. */
export type Translation =
  | { text: string; tokens: number; score?: number; nBest?: { text: string; score: number }[] }
  | { error: { code: string; message: string } };

/** What was counted of one answered sentence (for metrics and logs). */
export interface AnswerFacts {
  code?: string;
  internal?: Error;
  sourceTokens: number;
  targetTokens: number;
}

export interface TextsRun {
  signal?: AbortSignal;
  /** Each sentence's answer as soon as it is known (any order). */
  onAnswer?(index: number, t: Translation, facts: AnswerFacts): void;
}

/** Translates texts with m; every index gets an answer, errors included. Bad options throw before anything runs. */
export async function translateTexts(
  m: ServedModel,
  texts: string[],
  options: Partial<DecodingOptions>,
  run: TextsRun = {},
): Promise<Translation[]> {
  const max = options.truncate === true ? m.plan.header.profile.maxSrcLen : undefined;
  const sources: number[][] = [];
  const at: number[] = [];
  const out = new Array<Translation>(texts.length);
  const answer = (o: SentenceOutcome) => {
    const index = o.index;
    let t: Translation;
    let facts: AnswerFacts;
    if (o.error) {
      const code = o.error instanceof PlancError ? o.error.code : 'PLANC_E707';
      t = { error: { code, message: publicMessage(o.error, m) } };
      facts = { code, internal: o.error instanceof PlancError ? undefined : o.error, sourceTokens: 0, targetTokens: 0 };
    } else {
      const r = o.result;
      t = { text: m.tokenizer.decode(r.ids), tokens: r.ids.length };
      if (r.score !== undefined) t.score = r.score;
      if (r.alternatives) t.nBest = r.alternatives.map((a) => ({ text: m.tokenizer.decode(a.ids), score: a.score }));
      facts = { sourceTokens: sources[at.indexOf(index)]?.length ?? 0, targetTokens: r.ids.length };
    }
    out[index] = t;
    run.onAnswer?.(index, t, facts);
  };
  const early: SentenceOutcome[] = [];
  texts.forEach((text, i) => {
    try {
      sources.push(sourceIds(m.tokenizer, text, max));
      at.push(i);
    } catch (e) {
      early.push({ index: i, error: e as Error });
    }
  });
  if (sources.length === 0) {
    early.forEach(answer);
    return out;
  }
  // sampling: each sentence draws from the stream of its index in the request, also when an earlier one failed here
  const finished = m.scheduler.submit(
    sources,
    { ...options, sampleIndices: at },
    { signal: run.signal, onOutcome: (o) => answer({ ...o, index: at[o.index]! } as SentenceOutcome) },
  );
  early.forEach(answer);
  await finished;
  return out;
}
