// Text translation over a plan: the plan's tokenizer, then translateIds in chunks, results in input order or streamed.
import { PlancError } from '../compiler/diagnostics.ts';
import type { DecodingOptions } from './decode/options.ts';
import { translateIds } from './decode/translate-ids.ts';
import type { Plan } from './plan.ts';
import { loadTokenizer, type Tokenizer } from './tokenizer/tokenizer.ts';

export interface TranslateOptions extends Partial<DecodingOptions> {
  /** Sentences handed to translateIds at once (it sorts and batches within a chunk). Default 256. */
  chunkSize?: number;
}

/** One streamed result: the input's index, its translation, and how many tokens were generated. */
export interface StreamedTranslation { index: number; text: string; tokens: number }
export interface StreamedIds { index: number; ids: number[]; score?: number }

type Source<T> = Iterable<T> | AsyncIterable<T>;

const tokenizers = new WeakMap<Plan, Promise<Tokenizer>>();

/** The plan's embedded tokenizer (loaded once per plan); a PlancError naming the plan when it has none. */
export function planTokenizer(plan: Plan): Promise<Tokenizer> {
  let t = tokenizers.get(plan);
  if (!t) {
    const h = plan.header;
    if (h.tokenizerKind === '' || h.tokenizer.length === 0) {
      throw new PlancError('PLANC_E407', `plan ${plan.source} has no tokenizer: translate token ids (translateIds, or planc translate --ids), or re-run planc optimize with --tokenizer FILE`, { file: plan.source });
    }
    t = loadTokenizer(h.tokenizer, h.tokenizerKind, `${plan.source} (embedded ${h.tokenizerKind} tokenizer)`);
    tokenizers.set(plan, t);
  }
  return t;
}

/** Groups a (possibly async) sequence into arrays of at most n items. */
export async function* chunks<T>(items: Source<T>, n: number): AsyncIterable<T[]> {
  let chunk: T[] = [];
  for await (const x of items) {
    chunk.push(x);
    if (chunk.length >= n) { yield chunk; chunk = []; }
  }
  if (chunk.length) yield chunk;
}

function chunkSize(options: TranslateOptions): number {
  const n = options.chunkSize ?? 256;
  if (!Number.isInteger(n) || n < 1) throw new PlancError('PLANC_E405', `chunkSize must be a positive integer, got ${n}`);
  return n;
}

function decodingOnly(options: TranslateOptions): Partial<DecodingOptions> {
  const { chunkSize: _ignored, ...rest } = options;
  return rest;
}

/** Source ids in, translated ids out (streamed chunk by chunk, in input order). No tokenizer needed. */
export async function* translateIdsStream(plan: Plan, sources: Source<number[]>, options: TranslateOptions = {}): AsyncIterable<StreamedIds> {
  let index = 0;
  for await (const chunk of chunks(sources, chunkSize(options))) {
    const results = await translateIds(plan, chunk, decodingOnly(options));
    for (const r of results) yield { index: index++, ids: r.ids, score: r.score };
  }
}

/** Encodes a text as the model's source: the tokenizer's ids and the eos. */
export function sourceIds(tok: Tokenizer, text: string, eosId: number): number[] {
  return [...tok.encode(text), eosId];
}

function eosOf(plan: Plan): number {
  const eos = plan.header.decoding.eosId;
  if (eos === undefined) throw new PlancError('PLANC_E011', `plan ${plan.source} has no eos id: re-run planc optimize with --eos-id N`, { file: plan.source });
  return eos;
}

async function* encodeAll(tok: Tokenizer, texts: Source<string>, eosId: number): AsyncIterable<number[]> {
  for await (const t of texts) yield sourceIds(tok, t, eosId);
}

/** Texts in, translations out as they are ready (in input order), with their index. */
export async function* translateStream(plan: Plan, texts: Source<string>, options: TranslateOptions = {}): AsyncIterable<StreamedTranslation> {
  const tok = await planTokenizer(plan);
  const eosId = eosOf(plan);
  for await (const r of translateIdsStream(plan, encodeAll(tok, texts, eosId), options)) {
    yield { index: r.index, text: tok.decode(r.ids), tokens: r.ids.length };
  }
}

/** Translates texts with the plan's tokenizer; the results come back in input order. */
export async function translate(plan: Plan, texts: string[] | AsyncIterable<string>, options: TranslateOptions = {}): Promise<string[]> {
  const out: string[] = [];
  for await (const r of translateStream(plan, texts, options)) out[r.index] = r.text;
  return out;
}
