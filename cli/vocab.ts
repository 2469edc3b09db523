// `planc optimize --vocab`: parsing the option, calibrating clusters on a plan without the rewrite, the quality report.
import * as fs from 'node:fs';
import protobuf from 'protobufjs';
import { PlancError } from '../compiler/diagnostics.ts';
import type { Model } from '../compiler/ir.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import type { PlanDecoding, PlanVocab } from '../compiler/plan/types.ts';
import { corpusBleu } from '../compiler/vocab/bleu.ts';
import { activeSetStats, clusterActiveSets } from '../compiler/vocab/clusters.ts';
import { assignTs, kmeans, type AssignFn, type KMeansResult } from '../compiler/vocab/kmeans.ts';
import { readShortlist } from '../compiler/vocab/shortlist-read.ts';
import { defaultLimits, pieceLookup, shortlistFor } from '../compiler/vocab/shortlist.ts';
import { GraphView, type VocabRewriteOptions } from '../passes/pass.ts';
import { runPipeline, type PipelineOptions } from '../passes/pipeline.ts';
import { VOCAB_HIDDEN_OUTPUT } from '../compiler/plan/io-names.ts';
import type { DecodingRules } from '../runtime/decode/conventions.ts';
import { greedyBatch, type PickToken } from '../runtime/decode/greedy.ts';
import { maxLengthFor, validateDecodingOptions } from '../runtime/decode/options.ts';
import { rowBest, rowTop } from '../runtime/decode/scores.ts';
import { planDefaults } from '../runtime/decode/translate-ids.ts';
import { native, nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { planShortlist } from '../runtime/vocab.ts';
import { buildPlan, type BuildOptions } from '../codegen/build-plan.ts';

/** What --vocab asked for. */
export type VocabSpec =
  | { method: 'shortlist'; file: string; first?: number; best?: number }
  | { method: 'clusters'; clusters: number; topK: number };

const usage = (msg: string): never => { throw new PlancError('PLANC_E301', `--vocab: ${msg} (shortlist=FILE[,first=N,best=N] or clusters=R,K)`); };

/** Parses `shortlist=FILE[,first=100,best=100]` or `clusters=R,K` (K defaults to 3). */
export function parseVocabSpec(s: string): VocabSpec {
  const sl = /^shortlist=(.+)$/.exec(s);
  if (sl) {
    const parts = sl[1]!.split(',');
    const opts: Record<string, number> = {};
    while (parts.length > 1 && /^(first|best)=\d+$/.test(parts[parts.length - 1]!)) {
      const [k, v] = parts.pop()!.split('=') as [string, string];
      opts[k] = Number(v);
    }
    const file = parts.join(',');
    if (!file) usage('no shortlist file');
    return { method: 'shortlist', file, first: opts.first, best: opts.best };
  }
  const cl = /^clusters=(\d+)(?:,(\d+))?$/.exec(s);
  if (cl) {
    const clusters = Number(cl[1]), topK = cl[2] === undefined ? 3 : Number(cl[2]);
    if (clusters < 1) usage('R must be ≥ 1');
    if (topK < 1 || topK > 64) usage('K must be in [1, 64]');
    return { method: 'clusters', clusters, topK };
  }
  return usage(`cannot read '${s}'`);
}

/** Token pieces of a tokenizer file, id = position (SentencePiece ModelProto field 1, or tokenizer.json model.vocab). */
export function tokenizerPieces(bytes: Uint8Array, kind: 'spm' | 'hf'): string[] {
  if (kind === 'hf') {
    const vocab = (JSON.parse(Buffer.from(bytes).toString('utf8')) as { model?: { vocab?: Record<string, number> | [string, number][] } }).model?.vocab;
    if (Array.isArray(vocab)) return vocab.map(([p]) => p);
    const out: string[] = [];
    for (const [p, id] of Object.entries(vocab ?? {})) out[id] = p;
    return out;
  }
  const r = protobuf.Reader.create(bytes);
  const pieces: string[] = [];
  while (r.pos < r.len) {
    const tag = r.uint32();
    if (tag >>> 3 !== 1 || (tag & 7) !== 2) { r.skipType(tag & 7); continue; }
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
  return [...new Set([d.decoderStartId, d.eosId, d.padId, d.unkId].filter((x): x is number => x !== undefined))].sort((a, b) => a - b);
}

/** The native k-means assignment when the addon has it (kmeansAssign), else the TS one. */
export function assignFn(): { assign: AssignFn; native: boolean } {
  if (nativeAvailable()) {
    const f = (native() as unknown as { kmeansAssign?: AssignFn }).kmeansAssign;
    if (typeof f === 'function') return { assign: (...a) => f(...a), native: true };
  }
  return { assign: assignTs, native: false };
}

/** Lines of a text file (trimmed, empty lines dropped); a PlancError when it is missing or has none. */
export function readSentences(file: string, what: string): string[] {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', `${what} ${file} not found`, { file });
  const lines = fs.readFileSync(file, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '');
  if (lines.length === 0) throw new PlancError('PLANC_E501', `${what} ${file} has no sentences`, { file });
  return lines;
}

/** The output layer of a model (after fuse-project-topk): W^T [V, D] and bias [V], for the emulated masked projection. */
export interface OutputLayer { wt: Float32Array; bias: Float32Array | null; v: number; d: number }

export function outputLayer(model: Model): OutputLayer {
  const g = model.graphs.get('decoder_with_past') ?? model.graphs.get('decoder') ?? [...model.graphs.values()][0]!;
  const n = g.nodes.find((x) => x.domain === 'planc' && x.op === 'ProjectTopK');
  if (!n) throw new PlancError('PLANC_E301', '--vocab: the model has no output layer that planc.ProjectTopK could fuse (see --explain)');
  const view = new GraphView(g, model);
  const w = view.constant(n.inputs[1]!)!;
  const transposed = n.attrs.transposed?.kind === 'int' && n.attrs.transposed.value === 1;
  const [a, b] = w.dims as [number, number];
  const [d, v] = transposed ? [b, a] : [a, b];
  const src = w.nums;
  let wt: Float32Array;
  if (transposed) wt = Float32Array.from(src as ArrayLike<number>);
  else {
    wt = new Float32Array(v * d);
    for (let p = 0; p < d; p++) for (let j = 0; j < v; j++) wt[j * d + p] = src[p * v + j]!;
  }
  // The bias: a constant, or a [1, V] one (final_logits_bias) squeezed by fuse-project-topk.
  const bn = n.inputs[2], sq = bn ? view.node(bn)?.[1] : undefined;
  const bt = bn ? view.constant(sq?.op === 'Squeeze' ? sq.inputs[0]! : bn) : undefined;
  if (bn && !bt) throw new PlancError('PLANC_E301', `--vocab: the output layer's bias '${bn}' is not a constant`);
  const bias = bt ? Float32Array.from(bt.nums as ArrayLike<number>) : null;
  return { wt, bias, v, d };
}

/** argmax over the active ids not banned of h·W + b (ties: lower id); -1 when there are none. */
function maskedArgmax(layer: OutputLayer, h: Float32Array, ho: number, active: Int32Array, banned: ReadonlySet<number>): number {
  const { wt, bias, d } = layer;
  let best = -1, bestV = -Infinity;
  for (let q = 0; q < active.length; q++) {
    const j = active[q]!;
    if (banned.has(j)) continue;
    let s = bias ? bias[j]! : 0;
    const o = j * d;
    for (let p = 0; p < d; p++) s += h[ho + p]! * wt[o + p]!;
    if (s > bestV || best < 0) { bestV = s; best = j; }
  }
  return best;
}

/** Sentences per batch when calibrating and evaluating (the calibration plan is built to take them). */
export const CALIBRATION_BATCH = 32;

/**
 * A CPU plan of the model exposing ProjectTopK's hidden state (`vocab_hidden`): calibration and evaluation run it.
 * Its batch limit fits CALIBRATION_BATCH whatever the user's plan allows.
 */
export function exposePlan(model: Model, pipe: PipelineOptions, build: BuildOptions): { plan: Plan; optimized: Model } {
  const optimized = runPipeline(model, { ...pipe, vocab: { method: 'expose' } });
  const built = buildPlan(optimized, { ...build, maxBatch: Math.max(build.maxBatch, CALIBRATION_BATCH), target: 'cpu', onProgress: undefined });
  return { plan: loadPlanBytes(encodePlan(built.header, built.blob), 'calibration.plan'), optimized };
}

/** A progress bar on stderr (redrawn in place on a terminal, a line per 10% otherwise). */
export function progressBar(label: string, total: number, quiet = false): { tick(n: number): void; done(): void } {
  let done = 0, lastPct = -1;
  const t0 = performance.now();
  const draw = () => {
    const pct = total ? Math.floor((100 * done) / total) : 100;
    if (quiet || pct === lastPct || (!process.stderr.isTTY && pct % 10 !== 0)) return;
    lastPct = pct;
    const bar = '#'.repeat(Math.floor(pct / 5)).padEnd(20, '.');
    const s = ((performance.now() - t0) / 1000).toFixed(1);
    process.stderr.write(process.stderr.isTTY ? `\r  ${label} [${bar}] ${done}/${total} ${s} s\x1b[K` : `  ${label} [${bar}] ${done}/${total} ${s} s\n`);
  };
  return { tick(n) { done += n; draw(); }, done() { done = total; draw(); if (!quiet && process.stderr.isTTY) process.stderr.write('\n'); } };
}

/** A step's hidden states [rows, D] (the expose plan's vocab_hidden). */
const hiddenOf = (out: Parameters<PickToken>[0]) => out[VOCAB_HIDDEN_OUTPUT]!.data as Float32Array;

/**
 * Greedy decoding over an expose plan as the runtime's greedy decoding does it (greedyBatch: the rules' forced, banned
 * and eos ids), CALIBRATION_BATCH sentences at a time; `pick(out, r, sentence, banned)` chooses an unforced token
 * (default: the best allowed one). Caps: the runtime's with maxLengthRatio 2, maxLengthConstant 10 (the model's max
 * length and maxTgtLen too). Returns the ids per sentence (without eos).
 */
export function greedyExposed(plan: Plan, sources: number[][], rules: DecodingRules, maxTgtLen: number, pick: PickToken | undefined, onBatch?: (n: number) => void): number[][] {
  const o = validateDecodingOptions({ beamSize: 1, maxLengthRatio: 2, maxLengthConstant: 10 }, planDefaults(plan));
  const order = sources.map((_, i) => i).sort((a, b) => sources[a]!.length - sources[b]!.length);
  const out: number[][] = sources.map(() => []);
  for (let b0 = 0; b0 < order.length; b0 += CALIBRATION_BATCH) {
    const idx = order.slice(b0, b0 + CALIBRATION_BATCH);
    const hyps = greedyBatch(plan, idx.map((i) => sources[i]!), idx.map((i) => maxLengthFor(o, sources[i]!.length, maxTgtLen)), rules, false,
      pick && ((step, r, j, banned) => pick(step, r, idx[j]!, banned)));
    hyps.forEach((h, j) => (out[idx[j]!] = h.ids));
    onBatch?.(idx.length);
  }
  return out;
}

export interface Calibration {
  sentences: number;
  skipped: number;
  states: number;
  d: number;
  /** [states, D] and [states, K]. */
  hidden: Float32Array;
  topK: Int32Array;
  /** The greedy translations (ids without eos) of the sentences kept. */
  outputs: number[][];
}

/**
 * Translates the calibration sentences greedily (full projection, the model's conventions), recording the hidden
 * state and the top-K allowed ids of every step whose token is not forced.
 */
export function calibrate(plan: Plan, tok: Tokenizer, sentences: string[], topK: number, rules: DecodingRules, maxSrcLen: number, maxTgtLen: number, quiet: boolean): Calibration {
  return calibrateIds(plan, sentences.map((s) => tok.encodeSource(s)), topK, rules, maxSrcLen, maxTgtLen, quiet);
}

/** calibrate() on sources already as ids (the model's framing): for models without a tokenizer. */
export function calibrateIds(plan: Plan, all: number[][], topK: number, rules: DecodingRules, maxSrcLen: number, maxTgtLen: number, quiet: boolean): Calibration {
  const sources = all.filter((s) => s.length <= maxSrcLen);
  const skipped = all.length - sources.length;
  if (sources.length === 0) throw new PlancError('PLANC_E501', `every calibration sentence is longer than the plan's source limit (--max-src-len ${maxSrcLen})`);
  const dim = Number(/(\d+)\]?$/.exec(plan.outputs('decoder_with_past').find((o) => o.name === VOCAB_HIDDEN_OUTPUT)!.dims.at(-1)!)![1]);
  let hidden = new Float32Array(1 << 16), ids = new Int32Array(1 << 14);
  let n = 0;
  const bar = progressBar('calibrating', sources.length, quiet);
  const outputs = greedyExposed(plan, sources, rules, maxTgtLen, (out, r, _s, banned) => {
    if ((n + 1) * dim > hidden.length) { const h = new Float32Array(hidden.length * 2); h.set(hidden); hidden = h; }
    if ((n + 1) * topK > ids.length) { const x = new Int32Array(ids.length * 2); x.set(ids); ids = x; }
    hidden.set(hiddenOf(out).subarray(r * dim, (r + 1) * dim), n * dim);
    const top = rowTop(out, r, topK, banned).ids;
    ids.set(top, n * topK);
    n++;
    return top[0]!;
  }, (k) => bar.tick(k));
  bar.done();
  return { sentences: sources.length, skipped, states: n, d: dim, hidden: hidden.subarray(0, n * dim), topK: ids.subarray(0, n * topK), outputs };
}

/** The clusters of a calibration: k-means (R clamped to the states, recorded), active sets with the special ids. */
export function buildClusters(cal: Calibration, r: number, topK: number, vocab: number, specials: number[], quiet: boolean):
  { rewrite: Extract<VocabRewriteOptions, { method: 'clusters' }>; km: KMeansResult; adjustments: string[]; activeMean: number; assignNative: boolean } {
  const adjustments: string[] = [];
  if (cal.skipped) adjustments.push(`skipped ${cal.skipped} calibration sentence(s) longer than --max-src-len`);
  if (r > cal.states) adjustments.push(`R = ${r} lowered to ${cal.states}, the number of calibration states`);
  const { assign, native: assignNative } = assignFn();
  const bar = progressBar('k-means', 1, quiet);
  const km = kmeans(cal.hidden, cal.states, cal.d, { clusters: r, clampClusters: true, assign });
  bar.done();
  const sets = clusterActiveSets(km.assignments, cal.topK, topK, km.clusters, specials, vocab);
  const stats = activeSetStats(sets, km.assignments);
  return {
    rewrite: { method: 'clusters', centroids: km.centroids, cnorm: km.cnorm, offsets: sets.offsets, ids: sets.ids, clusters: km.clusters, dim: cal.d },
    km, adjustments, activeMean: stats.weightedMeanFraction, assignNative,
  };
}

/** Nearest centroid of h (argmin ‖C‖² − 2 h·C, ties lower). */
function nearest(c: Extract<VocabRewriteOptions, { method: 'clusters' }>, h: Float32Array, ho: number): number {
  let best = 0, bestV = Infinity;
  for (let j = 0; j < c.clusters; j++) {
    let dot = 0;
    const o = j * c.dim;
    for (let p = 0; p < c.dim; p++) dot += h[ho + p]! * c.centroids[o + p]!;
    const s = c.cnorm[j]! - 2 * dot;
    if (s < bestV) { bestV = s; best = j; }
  }
  return best;
}

export interface Quality {
  evalSentences: number;
  activeMean: number;
  activeMax: number;
  top1Agreement: number;
  identicalSentences: number;
  bleu?: number;
  bleuFull?: number;
  hyps: string[];
  hypsFull: string[];
}

/**
 * The quality report on held-out text, emulated: greedy decoding with the full projection, and greedy decoding whose
 * every step takes the argmax over the active ids only (per sentence, i.e. batch-1 masks), computed in JS from the
 * hidden state the plan exposes. Top-1 agreement: steps of the rewritten decode whose argmax equals the full one there.
 */
export function evaluateQuality(plan: Plan, tok: Tokenizer, layer: OutputLayer, rules: DecodingRules, srcText: string[], refText: string[] | undefined,
  rewrite: { kind: 'clusters'; c: Extract<VocabRewriteOptions, { method: 'clusters' }> } | { kind: 'shortlist'; v: PlanVocab },
  maxSrcLen: number, maxTgtLen: number, quiet: boolean): Quality {
  const sources = srcText.map((s) => tok.encodeSource(s));
  const long = sources.findIndex((s) => s.length > maxSrcLen);
  if (long >= 0) throw new PlancError('PLANC_E501', `--eval-src sentence ${long + 1} has ${sources[long]!.length} tokens, over --max-src-len ${maxSrcLen}`);
  const bar = progressBar('evaluating', 2 * sources.length, quiet);
  const full = greedyExposed(plan, sources, rules, maxTgtLen, undefined, (k) => bar.tick(k));
  let steps = 0, agree = 0, fracSum = 0, fracMax = 0;
  const shortlistMasks = new Map<number, Int32Array>();
  const activeOf = (hidden: Float32Array, r: number, sentence: number): Int32Array => {
    if (rewrite.kind === 'shortlist') {
      let m = shortlistMasks.get(sentence);
      if (!m) {
        const sl = rewrite.v;
        m = shortlistFor(planShortlist(sl), [sources[sentence]!], sl.first, sl.best, sl.specialIds, { includeSource: sl.includeSource });
        shortlistMasks.set(sentence, m);
      }
      return m;
    }
    const c = rewrite.c;
    const j = nearest(c, hidden, r * c.dim);
    return c.ids.subarray(c.offsets[j]!, c.offsets[j + 1]!);
  };
  const rewritten = greedyExposed(plan, sources, rules, maxTgtLen, (out, r, sentence, banned) => {
    const hidden = hiddenOf(out);
    const active = activeOf(hidden, r, sentence);
    // No active id allowed: the kernel's free slots read id 0.
    const tokId = Math.max(0, maskedArgmax(layer, hidden, r * layer.d, active, banned));
    steps++;
    if (tokId === rowBest(out, r, false, banned).tok) agree++;
    const f = active.length / layer.v;
    fracSum += f;
    fracMax = Math.max(fracMax, f);
    return tokId;
  }, (k) => bar.tick(k));
  bar.done();
  const hyps = rewritten.map((ids) => tok.decode(ids));
  const hypsFull = full.map((ids) => tok.decode(ids));
  const q: Quality = {
    evalSentences: sources.length, activeMean: steps ? fracSum / steps : 0, activeMax: fracMax, top1Agreement: steps ? agree / steps : 0,
    identicalSentences: rewritten.filter((x, i) => x.join() === full[i]!.join()).length / sources.length, hyps, hypsFull,
  };
  if (refText) {
    q.bleu = corpusBleu(hyps, refText).score;
    q.bleuFull = corpusBleu(hypsFull, refText).score;
  }
  return q;
}

/** An empty vocab header of a method (the fields filled in by optimize). */
export function emptyVocab(method: 'shortlist' | 'clusters'): PlanVocab {
  return {
    method, shortlistFile: '', shortlistFormat: '', offsets: [], targets: [], probs: [], frequent: [], first: 0, best: 0, specialIds: [],
    clusters: 0, topK: 0, calibrationFile: '', calibrationSentences: 0, calibrationStates: 0, kmeansIterations: 0, kmeansConverged: false,
    kmeansInertia: 0, emptyClusters: 0, calibrationActiveMean: 0, adjustments: '', evalSource: '', evalSentences: 0, activeMean: 0, activeMax: 0,
    top1Agreement: 0, identicalSentences: 0, hasBleu: false, bleu: 0, bleuFull: 0, evalMode: '', includeSource: false,
  };
}

/** The plan's vocab header for a shortlist: the file read with the tokenizer's pieces, first/best, the specials. */
export function shortlistVocab(spec: Extract<VocabSpec, { method: 'shortlist' }>, tokenizer: { bytes: Uint8Array; kind: 'spm' | 'hf' } | undefined,
  vocabSize: number, specials: number[]): PlanVocab {
  const pieces = tokenizer ? tokenizerPieces(tokenizer.bytes, tokenizer.kind) : undefined;
  const lookup = pieces ? pieceLookup(pieces) : undefined;
  const list = readShortlist(spec.file, { pieceToId: lookup?.pieceToId, vocabSize });
  const lim = defaultLimits(list);
  const v = emptyVocab('shortlist');
  const first = spec.first ?? lim.first, best = spec.best ?? (Number.isFinite(lim.best) ? lim.best : 1 << 30);
  Object.assign(v, {
    shortlistFile: spec.file, shortlistFormat: list.format, offsets: Array.from(list.offsets), targets: Array.from(list.targets),
    probs: list.probs ? Array.from(list.probs) : [], frequent: Array.from(list.frequent.subarray(0, Math.min(first, list.frequent.length))),
    first, best, specialIds: specials,
    // One tokenizer for both sides: a shared vocabulary, where Marian keeps the source ids themselves active too.
    includeSource: true,
  });
  if (list.ngrams.size) v.adjustments = `${list.ngrams.size} vmap n-gram entries are not kept (single-token entries only)`;
  return v;
}
