// Decoding facts of a Hugging Face model folder: config.json, then generation_config.json (which wins key by key).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PlancError } from '../../compiler/diagnostics.ts';
import type { DecodingFacts } from '../../compiler/ir.ts';

type Json = Record<string, unknown>;

/** Reads one config file's JSON object; undefined when the file is missing, PLANC_E008 when it is not a JSON object. */
export function readJson(dir: string, f: string): Json | undefined {
  const p = path.join(dir, f);
  if (!fs.existsSync(p)) return undefined;
  try {
    const j: unknown = JSON.parse(fs.readFileSync(p, 'utf8'));
    if (typeof j !== 'object' || j === null || Array.isArray(j)) throw new Error('not a JSON object');
    return j as Json;
  } catch (e) {
    throw new PlancError('PLANC_E008', `${f} is not valid JSON: ${(e as Error).message}`, { file: p });
  }
}

const isId = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** A list of token ids, or `bad(what it should be)`. */
function ids(v: unknown, bad: (want: string) => never): number[] {
  if (!Array.isArray(v) || !v.every(isId)) bad('a list of token ids');
  return v as number[];
}

/**
 * Decoding facts from config.json and generation_config.json. A key in generation_config.json wins over config.json
 * (null there unsets it). eos_token_id may be one id or a list; forced_eos_token_id a list keeps its first id.
 */
export function readDecodingFacts(dir: string): DecodingFacts {
  const merged: Json = {};
  const from: Record<string, string> = {};
  for (const f of ['config.json', 'generation_config.json']) {
    const j = readJson(dir, f);
    if (!j) continue;
    for (const [k, v] of Object.entries(j)) {
      if (v === null && f === 'config.json') continue;
      merged[k] = v;
      from[k] = f;
    }
  }
  const get = <T>(key: string, parse: (v: unknown, bad: (want: string) => never) => T): T | undefined => {
    const v = merged[key];
    if (v === undefined || v === null) return undefined;
    const bad = (want: string): never => {
      throw new PlancError(
        'PLANC_E008',
        `${from[key]}: ${key} = ${JSON.stringify(v).slice(0, 80)}; it must be ${want}`,
        { file: path.join(dir, from[key]!) },
      );
    };
    return parse(v, bad);
  };
  const id = (v: unknown, bad: (want: string) => never): number => (isId(v) ? v : bad('a token id (an integer ≥ 0)'));
  const idOrList = (v: unknown, bad: (want: string) => never): number[] => {
    const list = isId(v) ? [v] : ids(v, () => bad('a token id or a list of them'));
    return list.length ? list : bad('a token id or a non-empty list of them');
  };
  const positive = (v: unknown, bad: (want: string) => never): number =>
    isId(v) && v >= 1 ? v : bad('an integer ≥ 1');
  const eosIds = get('eos_token_id', idOrList);
  const facts: DecodingFacts = {
    decoderStartId: get('decoder_start_token_id', id),
    eosId: eosIds?.[0],
    eosIds,
    padId: get('pad_token_id', id),
    bosId: get('bos_token_id', id),
    unkId: get('unk_token_id', id),
    vocabSize: get('vocab_size', positive),
    maxLength: get('max_length', positive),
    maxNewTokens: get('max_new_tokens', positive),
    numBeams: get('num_beams', positive),
    earlyStopping: get('early_stopping', (v, bad) =>
      v === true || v === false || v === 'never'
        ? (String(v) as 'true' | 'false' | 'never')
        : bad('true, false or "never"'),
    ),
    lengthPenalty: get('length_penalty', (v, bad) =>
      typeof v === 'number' && Number.isFinite(v) ? v : bad('a number'),
    ),
    numReturnSequences: get('num_return_sequences', positive),
    minLength: get('min_length', (v, bad) => (isId(v) ? v : bad('an integer ≥ 0'))),
    minNewTokens: get('min_new_tokens', (v, bad) => (isId(v) ? v : bad('an integer ≥ 0'))),
    noRepeatNgramSize: get('no_repeat_ngram_size', (v, bad) => (isId(v) ? v : bad('an integer ≥ 0'))),
    encoderNoRepeatNgramSize: get('encoder_no_repeat_ngram_size', (v, bad) => (isId(v) ? v : bad('an integer ≥ 0'))),
    repetitionPenalty: get('repetition_penalty', (v, bad) =>
      typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : bad('a number > 0'),
    ),
    doSample: get('do_sample', (v, bad) => (typeof v === 'boolean' ? v : bad('true or false'))),
    temperature: get('temperature', (v, bad) =>
      typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : bad('a number ≥ 0'),
    ),
    topK: get('top_k', (v, bad) => (isId(v) ? v : bad('an integer ≥ 0'))),
    topP: get('top_p', (v, bad) => (typeof v === 'number' && v >= 0 && v <= 1 ? v : bad('a number in [0, 1]'))),
    forcedBosId: get('forced_bos_token_id', id),
    forcedEosId: get('forced_eos_token_id', (v, bad) => idOrList(v, bad)[0]!),
    suppressTokens: get('suppress_tokens', ids),
    beginSuppressTokens: get('begin_suppress_tokens', ids),
    badWords: get('bad_words_ids', (v, bad) => {
      if (!Array.isArray(v) || !v.every((s) => Array.isArray(s) && s.length > 0 && s.every(isId)))
        bad('a list of non-empty token id lists');
      return (v as number[][]).map((s) => ({ ids: s }));
    }),
  };
  for (const k of Object.keys(facts) as (keyof DecodingFacts)[]) if (facts[k] === undefined) delete facts[k];
  return facts;
}
