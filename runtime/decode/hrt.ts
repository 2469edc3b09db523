// Strategy 'hrt' (docs/hrt.md section 3): Skip-AT greedy or beam with [BOS_k] at positions 0, k, 2k, …, then one Skip-CMLM pass through decoder_nat filling the k − 1 masked positions before each Skip-AT token; the final choice by paper eq. 2.
import { PlancError } from '../../compiler/diagnostics.ts';
import type { HrtFacts } from '../../compiler/ir.ts';
import { NAT_GRAPH, NAT_MASK_INPUT, POSITION_IDS_INPUT, STEP_INPUT } from '../../compiler/plan/io-names.ts';
import type { Plan } from '../plan.ts';
import { allocTensor, type FeedTensor, type ResidentTensor, type RtTensor } from '../tensor.ts';
import { vocabFeeds } from '../vocab.ts';
import { beamSteps } from './beam.ts';
import { DecodingRules } from './conventions.ts';
import { greedyToken, type Hypothesis } from './greedy.ts';
import type { DecodingOptions } from './options.ts';
import { positionBest } from './scores.ts';
import { int64, sourceFeeds } from './source-feeds.ts';
import { encoderGroups } from './encoder-groups.ts';
import { gatherRows, StepRunner } from './step-runner.ts';
import type { Steps } from './steps.ts';
import type { BatchJob, DecodingStrategy } from './strategy.ts';

/** The plan's HRT record, or PLANC_E410 saying what is missing. */
export function hrtFacts(plan: Plan): HrtFacts {
  const h = plan.header.decoding.hrt;
  if (!h) {
    throw new PlancError(
      'PLANC_E410',
      `strategy 'hrt': plan ${plan.source} is not an HRT plan: its model's config.json had no hrt section, so the plan records no [BOS_k] ids, [MASK] id or chunk sizes and has no '${NAT_GRAPH}' graph (docs/hrt.md: the model contract)`,
      {},
      { option: 'strategy', value: 'hrt', expected: 'a plan of a model meeting the HRT contract' },
    );
  }
  return h;
}

/** The chunk size the options ask for (0: the plan's smallest above 1) and its start token, or PLANC_E410 naming the option. */
export function hrtChunk(plan: Plan, o: Pick<DecodingOptions, 'chunk'>): { k: number; bos: number } {
  const h = hrtFacts(plan);
  const k = o.chunk || (h.chunkSizes.find((c) => c > 1) ?? 1);
  const at = h.chunkSizes.indexOf(k);
  if (at < 0) {
    throw new PlancError(
      'PLANC_E410',
      (opt) =>
        `strategy 'hrt': ${opt('chunk')} ${k}, but plan ${plan.source} decodes chunk sizes ${h.chunkSizes.join(', ')} (its model's hrt.bos_k_ids)`,
      {},
      { option: 'chunk', value: k, expected: `one of ${h.chunkSizes.join(', ')}` },
    );
  }
  if (k > 1 && !plan.graphs.includes(NAT_GRAPH))
    throw new PlancError(
      'PLANC_E410',
      `strategy 'hrt': plan ${plan.source} has no '${NAT_GRAPH}' graph (the Skip-CMLM pass chunk ${k} needs)`,
    );
  return { k, bos: h.bosIds[at]! };
}

/** Refuses a cap whose positions run past the model's position table (stage II reads positions up to k · ceil(maxLen / k)). */
function checkPositions(plan: Plan, h: HrtFacts, k: number, maxLen: number): void {
  const last = k * Math.ceil(maxLen / k);
  if (h.maxPositions > 0 && last >= h.maxPositions) {
    throw new PlancError(
      'PLANC_E410',
      (opt) =>
        `strategy 'hrt': ${opt('maxLength')} ${maxLen} with chunk ${k} reads position ${last}, past the model's ${h.maxPositions} positions (plan ${plan.source}); lower ${opt('maxLength')}`,
      {},
      { option: 'maxLength', value: maxLen, expected: `at most ${h.maxPositions - k}` },
    );
  }
}

/** A Skip-AT hypothesis: its sentence, tokens z (its final eos when it has one), and stage-I log-prob sum. */
interface SkipHyp {
  sentence: number;
  z: number[];
  at: number;
}

/** Stage I greedy: one Skip-AT hypothesis per sentence; the runner stays alive for stage II (its encoder output). */
function* skipGreedy(
  runner: StepRunner,
  sources: number[][],
  caps: number[],
  rules: DecodingRules,
  scores: boolean,
): Steps<SkipHyp[]> {
  const out: Hypothesis[] = sources.map(() => ({ ids: [], logProb: 0, length: 0 }));
  let live = sources.map((_, i) => i);
  for (let t = 0; ; t++) {
    const next: number[] = [];
    const keep: number[] = [];
    live.forEach((i, r) => {
      const tok = greedyToken(runner.out, r, i, t, caps[i]!, out[i]!, sources[i]!, rules, scores);
      if (tok === undefined) return;
      keep.push(r);
      next.push(tok);
    });
    if (keep.length === 0) break;
    runner.select(keep);
    live = keep.map((r) => live[r]!);
    runner.step(next);
    yield;
  }
  return out.map((h, i) => ({ sentence: i, z: withEos(h, rules), at: h.logProb }));
}

/** A hypothesis' tokens with its final eos when it ended on one (its length counts it). */
const withEos = (h: Hypothesis, rules: DecodingRules) => (h.length > h.ids.length ? [...h.ids, rules.c.eosId] : h.ids);

/**
 * Stage II: decoder_nat over the rows (each: [MASK] at p mod k ≠ 0, z_{p/k} at p = k, 2k, …, positions 1..n, padded
 * with id 0, position 0, mask 0), in calls of rows of similar n (encoderGroups: padding costs a full projection per
 * position); each row's output cut before its first eos, to maxLen − 1 tokens, scored at + the log-probs of its masked
 * positions (paper eq. 2). `hidden`: the encoder output of the batch's sources [sentences, S, D] on the host.
 */
function skipCmlm(
  plan: Plan,
  rows: SkipHyp[],
  sources: number[][],
  maxLens: number[],
  k: number,
  h: HrtFacts,
  rules: DecodingRules,
  hidden: RtTensor,
): Hypothesis[] {
  const inputs = rows.map(({ z }) =>
    Array.from({ length: z.length * k }, (_, i) => ((i + 1) % k === 0 ? z[(i + 1) / k - 1]! : h.maskId)),
  );
  const order = inputs.map((_, j) => j).sort((a, b) => inputs[a]!.length - inputs[b]!.length);
  const { mask } = sourceFeeds(sources, rules.c.padId);
  const takes = new Set(plan.inputs(NAT_GRAPH).map((i) => i.name));
  const vocab = Object.entries(vocabFeeds(plan.header, sources)).filter(([name]) => takes.has(name));
  const out = new Array<Hypothesis>(rows.length);
  for (const [a, b] of encoderGroups(order.map((j) => inputs[j]!.length))) {
    const group = order.slice(a, b);
    const T = inputs[group.at(-1)!]!.length;
    const padded = (f: (x: number[], p: number) => number) =>
      group.flatMap((j) => Array.from({ length: T }, (_, p) => (p < inputs[j]!.length ? f(inputs[j]!, p) : 0)));
    const sentences = group.map((j) => rows[j]!.sentence);
    const feeds: Record<string, FeedTensor> = {
      [STEP_INPUT]: int64(
        group.length,
        T,
        padded((x, p) => x[p]!),
      ),
      [POSITION_IDS_INPUT]: int64(
        group.length,
        T,
        padded((_, p) => p + 1),
      ),
      [NAT_MASK_INPUT]: int64(
        group.length,
        T,
        padded(() => 1),
      ),
      encoder_attention_mask: gatherRows(mask, sentences),
      encoder_hidden_states: gatherRows(hidden, sentences),
      ...Object.fromEntries(vocab),
    };
    const scores = plan.runSync(NAT_GRAPH, feeds);
    group.forEach((j, r) => {
      let nat = 0;
      const y = inputs[j]!.map((tok, p) => {
        if (tok !== h.maskId) return tok;
        const best = positionBest(scores, r, p, true);
        nat += best.logProb;
        return best.tok;
      });
      const cut = y.findIndex((t) => rules.isEos(t));
      const ids = (cut < 0 ? y : y.slice(0, cut)).slice(0, maxLens[rows[j]!.sentence]! - 1);
      out[j] = { ids, logProb: rows[j]!.at + nat, length: ids.length + (cut < 0 ? 0 : 1) };
    });
  }
  return out;
}

/** A resident tensor's data on the host. */
function hostCopy(plan: Plan, t: ResidentTensor): RtTensor {
  const host = allocTensor(t.dtype, t.dims);
  plan.residentRead(t.resident, t.offset, host.data);
  return host;
}

/** Per sentence, its filled hypotheses best first by eq. 2's score (ties: the earlier stage-I rank). */
function bySentence(n: number, rows: SkipHyp[], filled: Hypothesis[]): Hypothesis[][] {
  const out: Hypothesis[][] = Array.from({ length: n }, () => []);
  rows.forEach((r, j) => out[r.sentence]!.push(filled[j]!));
  for (const hs of out) hs.sort((a, b) => (b.logProb > a.logProb ? 1 : b.logProb < a.logProb ? -1 : 0));
  return out;
}

/** One batch of HRT decoding (docs/hrt.md section 3). */
function* hrtSteps({ plan, sources, maxLens, rules, options }: BatchJob): Steps<Hypothesis[][]> {
  const h = hrtFacts(plan);
  const { k, bos } = hrtChunk(plan, options);
  for (const m of maxLens) checkPositions(plan, h, k, m);
  const caps = maxLens.map((m) => Math.ceil(m / k));
  const stageI = new DecodingRules({ ...rules.c, startId: bos });
  const scores = options.returnScores || options.beamSize > 1;
  if (options.beamSize === 1) {
    const runner = new StepRunner(plan, sources, stageI.c, sources.length, Math.max(...caps), { positionStride: k });
    try {
      const rows = yield* skipGreedy(runner, sources, caps, stageI, scores);
      if (k === 1)
        return rows.map((r) => [
          { ids: rules.isEos(r.z.at(-1) ?? -1) ? r.z.slice(0, -1) : r.z, logProb: r.at, length: r.z.length },
        ]);
      const filled = skipCmlm(plan, rows, sources, maxLens, k, h, rules, hostCopy(plan, runner.encoderOutput()));
      yield;
      return bySentence(sources.length, rows, filled);
    } finally {
      runner.release();
    }
  }
  const found = yield* beamSteps(
    plan,
    sources,
    caps,
    stageI,
    { k: options.beamSize, alpha: options.lengthPenalty, earlyStopping: options.earlyStopping },
    { positionStride: k },
  );
  if (k === 1) return found;
  const keep = options.natBeams || options.beamSize;
  const rows: SkipHyp[] = found.flatMap((hs, i) =>
    hs.slice(0, keep).map((x) => ({ sentence: i, z: withEos(x, stageI), at: x.logProb })),
  );
  // the sources' encoder output (beamSteps gave its runner's buffers back): the encoder run again, once per sentence
  const { ids, mask } = sourceFeeds(sources, rules.c.padId);
  const hidden = plan.runSync('encoder', { input_ids: ids, attention_mask: mask }).last_hidden_state!;
  const filled = skipCmlm(plan, rows, sources, maxLens, k, h, rules, hidden);
  yield;
  return bySentence(sources.length, rows, filled);
}

/** Decoding options HRT leaves alone: the logits processors and sampling the reference decoder does not apply. */
const REFUSED: [keyof DecodingOptions, (o: DecodingOptions) => boolean, string][] = [
  ['doSample', (o) => o.doSample, 'false'],
  ['repetitionPenalty', (o) => o.repetitionPenalty !== 1, '1'],
  ['noRepeatNgramSize', (o) => o.noRepeatNgramSize !== 0, '0'],
  ['encoderNoRepeatNgramSize', (o) => o.encoderNoRepeatNgramSize !== 0, '0'],
  ['minNewTokens', (o) => o.minNewTokens !== 0, '0'],
  ['targetLang', (o) => o.targetLang !== '', "''"],
];

export const HRT: DecodingStrategy = {
  name: 'hrt',
  summary:
    'hybrid-regressive (an HRT model, docs/hrt.md): Skip-AT greedy or beam every chunk-th token, then one Skip-CMLM pass fills the rest',
  check(o) {
    for (const [name, on, want] of REFUSED) {
      if (on(o))
        throw new PlancError(
          'PLANC_E411',
          `bad decoding option: ${name} = ${JSON.stringify(o[name])} does not work with strategy 'hrt'; it must be ${want}`,
          {},
          { option: name, value: o[name], expected: `${want} with strategy 'hrt'` },
        );
    }
  },
  checkPlan(plan, o) {
    hrtChunk(plan, o);
  },
  topkNeeded: (rules, o) => rules.topkNeeded(o.beamSize),
  decode: hrtSteps,
};
