// Text translation over a plan: the plan's tokenizer, then translateIds in chunks, results in input order or streamed.
import { PlancError } from '../compiler/diagnostics.ts';
import { fail } from '../compiler/diagnostics-catalog.ts';
import type { DecodingOptions } from './decode/options.ts';
import { tooLong, translateIds } from './decode/translate-ids.ts';
import type { Plan } from './plan.ts';
import { planTokenizer, type Tokenizer } from './tokenizer/tokenizer.ts';

export interface TranslateOptions extends Partial<DecodingOptions> {
  /** Sentences handed to translateIds at once (it sorts and batches within a chunk). Default 256. */
  chunkSize?: number;
}

/** One streamed result: the input's index, its translation, how many tokens were generated; error: it failed alone. */
export interface StreamedTranslation {
  index: number;
  text: string;
  tokens: number;
  error?: PlancError;
}
export interface StreamedIds {
  index: number;
  ids: number[];
  score?: number;
  error?: PlancError;
}

type Source<T> = Iterable<T> | AsyncIterable<T>;

export { planTokenizer };

/** Groups a (possibly async) sequence into arrays of at most n items. */
export async function* chunks<T>(items: Source<T>, n: number): AsyncIterable<T[]> {
  let chunk: T[] = [];
  for await (const x of items) {
    chunk.push(x);
    if (chunk.length >= n) {
      yield chunk;
      chunk = [];
    }
  }
  if (chunk.length) yield chunk;
}

function chunkSize(options: TranslateOptions): number {
  const n = options.chunkSize ?? 256;
  if (!Number.isInteger(n) || n < 1)
    fail('badOption', { option: 'chunkSize', value: n, expected: 'a positive integer' });
  return n;
}

function decodingOnly(options: TranslateOptions): Partial<DecodingOptions> {
  const { chunkSize: _ignored, ...rest } = options;
  return rest;
}

/**
 * Source ids in (verbatim, see translateIds), translated ids out, streamed chunk by chunk in input order. A source over
 * the plan's maxSrcLen fails alone (its item carries the error, ids []) unless options.truncate. No tokenizer needed.
 * With doSample, source i samples from the stream of (seed, options.sampleIndices?.[i] ?? i) whatever the chunking.
 */
export async function* translateIdsStream(
  plan: Plan,
  sources: Source<number[]>,
  options: TranslateOptions = {},
): AsyncIterable<StreamedIds> {
  const max = plan.header.profile.maxSrcLen;
  let index = 0;
  for await (const chunk of chunks(sources, chunkSize(options))) {
    const fits = chunk.map((s) => options.truncate === true || s.length <= max);
    const sampleIndices = chunk.flatMap((_, i) => (fits[i] ? [options.sampleIndices?.[index + i] ?? index + i] : []));
    const results = await translateIds(
      plan,
      chunk.filter((_, i) => fits[i]),
      { ...decodingOnly(options), sampleIndices },
    );
    let j = 0;
    for (const [i, s] of chunk.entries()) {
      if (!fits[i]) {
        yield { index: index++, ids: [], error: tooLong('the source', s.length, max) };
        continue;
      }
      const r = results[j++]!;
      yield { index: index++, ids: r.ids, score: r.score };
    }
  }
}

/**
 * A text as the model's source: the tokenizer's framing (tokenizer.json's post-processor, or `X </s>` for
 * SentencePiece); a blank text gives no ids (and an empty translation). Over `max` ids (when given) the text's own
 * tokens are cut so that the framing still fits around them.
 */
export function sourceIds(tok: Tokenizer, text: string, max?: number): number[] {
  if (text.trim() === '') return [];
  const framed = tok.encodeSource(text);
  if (max === undefined || framed.length <= max) return framed;
  const own = tok.encode(text);
  const at = framed.findIndex((_, p) => own.every((id, j) => framed[p + j] === id));
  if (own.length === 0 || at < 0) return framed.slice(0, max);
  const prefix = framed.slice(0, at);
  const suffix = framed.slice(at + own.length);
  return [...prefix, ...own.slice(0, Math.max(0, max - prefix.length - suffix.length)), ...suffix].slice(0, max);
}

/** Texts in, translations out as they are ready (in input order), with their index; a failed line has `error` and text ''. */
export async function* translateStream(
  plan: Plan,
  texts: Source<string>,
  options: TranslateOptions = {},
): AsyncIterable<StreamedTranslation> {
  const tok = await planTokenizer(plan);
  const max = options.truncate === true ? plan.header.profile.maxSrcLen : undefined;
  async function* encodeAll(): AsyncIterable<number[]> {
    for await (const t of texts) yield sourceIds(tok, t, max);
  }
  for await (const r of translateIdsStream(plan, encodeAll(), options)) {
    yield {
      index: r.index,
      text: r.error ? '' : tok.decode(r.ids),
      tokens: r.ids.length,
      ...(r.error ? { error: r.error } : {}),
    };
  }
}

/** Translates texts with the plan's tokenizer; the results come back in input order (the first failed line throws). */
export async function translate(
  plan: Plan,
  texts: string[] | AsyncIterable<string>,
  options: TranslateOptions = {},
): Promise<string[]> {
  const out: string[] = [];
  for await (const r of translateStream(plan, texts, options)) {
    if (r.error)
      throw new PlancError(r.error.code, `sentence ${r.index}: ${r.error.message.replace(/^PLANC_E\d+: /, '')}`);
    out[r.index] = r.text;
  }
  return out;
}
