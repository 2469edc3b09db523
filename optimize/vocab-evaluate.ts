// The vocab rewrite's quality report on held-out text, emulated in JS from the hidden state an expose plan outputs.
import { PlancError } from '../compiler/diagnostics.ts';
import { fail } from '../compiler/diagnostics-catalog.ts';
import type { Model } from '../compiler/ir.ts';
import type { PlanVocab } from '../compiler/plan/types.ts';
import { transposeMatrix } from '../compiler/tensor.ts';
import { corpusBleu } from '../compiler/vocab/bleu.ts';
import { shortlistFor } from '../compiler/vocab/shortlist.ts';
import { GraphView, type ProgressReporter, type VocabRewriteOptions } from '../passes/pass.ts';
import type { DecodingRules } from '../runtime/decode/conventions.ts';
import { rowBest } from '../runtime/decode/scores.ts';
import type { Plan } from '../runtime/plan.ts';
import type { Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { planShortlist } from '../runtime/vocab.ts';
import { greedyExposed, hiddenOf } from './vocab-calibrate.ts';

/** The output layer of a model (after fuse-project-topk): W^T [V, D] and bias [V], for the emulated masked projection. */
export interface OutputLayer {
  wt: Float32Array;
  bias: Float32Array | null;
  v: number;
  d: number;
}

export function outputLayer(model: Model): OutputLayer {
  const g = model.graphs.get('decoder_with_past') ?? model.graphs.get('decoder') ?? [...model.graphs.values()][0]!;
  const n = g.nodes.find((x) => x.domain === 'planc' && x.op === 'ProjectTopK');
  if (!n)
    fail('optionProblem', {
      option: 'vocab',
      why: (opt) => `the model has no output layer that planc.ProjectTopK could fuse (see ${opt('explain')})`,
    });
  const view = new GraphView(g, model);
  const w = view.constant(n.inputs[1]!)!;
  const transposed = n.attrs.transposed?.kind === 'int' && n.attrs.transposed.value === 1;
  const [a, b] = w.dims as [number, number];
  const [d, v] = transposed ? [b, a] : [a, b];
  const wt = transposed ? Float32Array.from(w.nums as ArrayLike<number>) : transposeMatrix(w.nums, d, v);
  // The bias: a constant, or a [1, V] one (final_logits_bias) squeezed by fuse-project-topk.
  const bn = n.inputs[2],
    sq = bn ? view.node(bn)?.[1] : undefined;
  const bt = bn ? view.constant(sq?.op === 'Squeeze' ? sq.inputs[0]! : bn) : undefined;
  if (bn && !bt) fail('optionProblem', { option: 'vocab', why: `the output layer's bias '${bn}' is not a constant` });
  const bias = bt ? Float32Array.from(bt.nums as ArrayLike<number>) : null;
  return { wt, bias, v, d };
}

/** argmax over the active ids not banned of h·W + b (ties: lower id); -1 when there are none. */
function maskedArgmax(
  layer: OutputLayer,
  h: Float32Array,
  ho: number,
  active: Int32Array,
  banned: ReadonlySet<number>,
): number {
  const { wt, bias, d } = layer;
  let best = -1,
    bestV = -Infinity;
  for (let q = 0; q < active.length; q++) {
    const j = active[q]!;
    if (banned.has(j)) continue;
    let s = bias ? bias[j]! : 0;
    const o = j * d;
    for (let p = 0; p < d; p++) s += h[ho + p]! * wt[o + p]!;
    if (s > bestV || best < 0) {
      bestV = s;
      best = j;
    }
  }
  return best;
}

/** Nearest centroid of h (argmin ‖C‖² − 2 h·C, ties lower). */
function nearest(c: Extract<VocabRewriteOptions, { method: 'clusters' }>, h: Float32Array, ho: number): number {
  let best = 0,
    bestV = Infinity;
  for (let j = 0; j < c.clusters; j++) {
    let dot = 0;
    const o = j * c.dim;
    for (let p = 0; p < c.dim; p++) dot += h[ho + p]! * c.centroids[o + p]!;
    const s = c.cnorm[j]! - 2 * dot;
    if (s < bestV) {
      bestV = s;
      best = j;
    }
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
  /** The full projection's greedy ids per sentence (pass them back to measure another rewrite on the same text). */
  fullIds: number[][];
}

/**
 * The quality report on held-out text, emulated: greedy decoding with the full projection, and greedy decoding whose
 * every step takes the argmax over the active ids only (per sentence, i.e. batch-1 masks), computed in JS from the
 * hidden state the plan exposes. Top-1 agreement: steps of the rewritten decode whose argmax equals the full one there.
 */
export function evaluateQuality(
  plan: Plan,
  tok: Tokenizer,
  layer: OutputLayer,
  rules: DecodingRules,
  srcText: string[],
  refText: string[] | undefined,
  rewrite:
    | { kind: 'clusters'; c: Extract<VocabRewriteOptions, { method: 'clusters' }> }
    | { kind: 'shortlist'; v: PlanVocab },
  maxSrcLen: number,
  maxTgtLen: number,
  progress?: ProgressReporter,
  fullIds?: number[][],
): Quality {
  const sources = srcText.map((s) => tok.encodeSource(s));
  const long = sources.findIndex((s) => s.length > maxSrcLen);
  if (long >= 0)
    throw new PlancError(
      'PLANC_E501',
      (opt) =>
        `${opt('evalSrc')} sentence ${long + 1} has ${sources[long]!.length} tokens, over ${opt('maxSrcLen')} ${maxSrcLen}`,
    );
  const bar = progress?.bar('evaluating', (fullIds ? 1 : 2) * sources.length);
  const full = fullIds ?? greedyExposed(plan, sources, rules, maxTgtLen, undefined, (k) => bar?.tick(k));
  let steps = 0,
    agree = 0,
    fracSum = 0,
    fracMax = 0;
  const shortlistMasks = new Map<number, Int32Array>();
  const activeOf = (hidden: Float32Array, r: number, sentence: number): Int32Array => {
    if (rewrite.kind === 'shortlist') {
      let m = shortlistMasks.get(sentence);
      if (!m) {
        const sl = rewrite.v;
        m = shortlistFor(planShortlist(sl), [sources[sentence]!], sl.first, sl.best, sl.specialIds, {
          includeSource: sl.includeSource,
        });
        shortlistMasks.set(sentence, m);
      }
      return m;
    }
    const c = rewrite.c;
    const j = nearest(c, hidden, r * c.dim);
    return c.ids.subarray(c.offsets[j]!, c.offsets[j + 1]!);
  };
  const rewritten = greedyExposed(
    plan,
    sources,
    rules,
    maxTgtLen,
    (out, r, sentence, banned) => {
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
    },
    (k) => bar?.tick(k),
  );
  bar?.done();
  const hyps = rewritten.map((ids) => tok.decode(ids));
  const hypsFull = full.map((ids) => tok.decode(ids));
  const q: Quality = {
    evalSentences: sources.length,
    activeMean: steps ? fracSum / steps : 0,
    activeMax: fracMax,
    top1Agreement: steps ? agree / steps : 0,
    identicalSentences: rewritten.filter((x, i) => x.join() === full[i]!.join()).length / sources.length,
    hyps,
    hypsFull,
    fullIds: full,
  };
  if (refText) {
    q.bleu = corpusBleu(hyps, refText).score;
    q.bleuFull = corpusBleu(hypsFull, refText).score;
  }
  return q;
}
