// The plan's vocab header: an empty one per method, the shortlist's (read with the tokenizer's pieces), special ids.
import * as fs from 'node:fs';
import protobuf from 'protobufjs';
import { PlancError } from '../diagnostics.ts';
import type { PlanDecoding, PlanVocab } from '../plan/types.ts';
import { readShortlist } from './shortlist-read.ts';
import { defaultLimits, pieceLookup } from './shortlist.ts';
import type { VocabSpec } from './spec.ts';

/** Token pieces of a tokenizer file, id = position (SentencePiece ModelProto field 1, or tokenizer.json model.vocab). */
export function tokenizerPieces(bytes: Uint8Array, kind: 'spm' | 'hf'): string[] {
  if (kind === 'hf') {
    const vocab = (
      JSON.parse(Buffer.from(bytes).toString('utf8')) as {
        model?: { vocab?: Record<string, number> | [string, number][] };
      }
    ).model?.vocab;
    if (Array.isArray(vocab)) return vocab.map(([p]) => p);
    const out: string[] = [];
    for (const [p, id] of Object.entries(vocab ?? {})) out[id] = p;
    return out;
  }
  const r = protobuf.Reader.create(bytes);
  const pieces: string[] = [];
  while (r.pos < r.len) {
    const tag = r.uint32();
    if (tag >>> 3 !== 1 || (tag & 7) !== 2) {
      r.skipType(tag & 7);
      continue;
    }
    const end = r.uint32() + r.pos;
    let piece = '';
    while (r.pos < end) {
      const t = r.uint32();
      if (t >>> 3 === 1 && (t & 7) === 2) piece = r.string();
      else r.skipType(t & 7);
    }
    pieces.push(piece);
  }
  return pieces;
}

/** The ids always kept active: start, eos, pad, unk. */
export function specialIdsOf(d: PlanDecoding): number[] {
  return [...new Set([d.decoderStartId, d.eosId, d.padId, d.unkId].filter((x): x is number => x !== undefined))].sort(
    (a, b) => a - b,
  );
}

/** Lines of a text file (trimmed, empty lines dropped); a PlancError when it is missing or has none. */
export function readSentences(file: string, option: string): string[] {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', (opt) => `${opt(option)} ${file} not found`, { file });
  const lines = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  if (lines.length === 0)
    throw new PlancError('PLANC_E501', (opt) => `${opt(option)} ${file} has no sentences`, { file });
  return lines;
}

/** An empty vocab header of a method (the fields filled in by optimize). */
export function emptyVocab(method: 'shortlist' | 'clusters'): PlanVocab {
  return {
    method,
    shortlistFile: '',
    shortlistFormat: '',
    offsets: [],
    targets: [],
    probs: [],
    frequent: [],
    first: 0,
    best: 0,
    specialIds: [],
    clusters: 0,
    topK: 0,
    calibrationFile: '',
    calibrationSentences: 0,
    calibrationStates: 0,
    kmeansIterations: 0,
    kmeansConverged: false,
    kmeansInertia: 0,
    emptyClusters: 0,
    calibrationActiveMean: 0,
    adjustments: '',
    evalSource: '',
    evalSentences: 0,
    activeMean: 0,
    activeMax: 0,
    top1Agreement: 0,
    identicalSentences: 0,
    hasBleu: false,
    bleu: 0,
    bleuFull: 0,
    evalMode: '',
    includeSource: false,
    curve: [],
    choice: '',
  };
}

/** The plan's vocab header for a shortlist: the file read with the tokenizer's pieces, first/best, the specials. */
export function shortlistVocab(
  spec: Extract<VocabSpec, { method: 'shortlist' }>,
  tokenizer: { bytes: Uint8Array; kind: 'spm' | 'hf' } | undefined,
  vocabSize: number,
  specials: number[],
): PlanVocab {
  const pieces = tokenizer ? tokenizerPieces(tokenizer.bytes, tokenizer.kind) : undefined;
  const lookup = pieces ? pieceLookup(pieces) : undefined;
  const list = readShortlist(spec.file, { pieceToId: lookup?.pieceToId, vocabSize });
  const lim = defaultLimits(list);
  const v = emptyVocab('shortlist');
  const first = spec.first ?? lim.first,
    best = spec.best ?? (Number.isFinite(lim.best) ? lim.best : 1 << 30);
  Object.assign(v, {
    shortlistFile: spec.file,
    shortlistFormat: list.format,
    offsets: Array.from(list.offsets),
    targets: Array.from(list.targets),
    probs: list.probs ? Array.from(list.probs) : [],
    frequent: Array.from(list.frequent.subarray(0, Math.min(first, list.frequent.length))),
    first,
    best,
    specialIds: specials,
    // One tokenizer for both sides: a shared vocabulary, where Marian keeps the source ids themselves active too.
    includeSource: true,
  });
  if (list.ngrams.size)
    v.adjustments = `${list.ngrams.size} vmap n-gram entries are not kept (single-token entries only)`;
  return v;
}
