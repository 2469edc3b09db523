// Decoding strategies behind one interface: translateIds picks one by name and runs it per batch; greedy and beam
// are entries of STRATEGIES, and a new strategy plugs in by adding an entry (nothing else branches on the name).
import { PlancError } from '../../compiler/diagnostics.ts';
import type { Plan } from '../plan.ts';
import { beamSteps } from './beam.ts';
import type { DecodingRules } from './conventions.ts';
import { greedySteps, type Hypothesis } from './greedy.ts';
import { HRT } from './hrt.ts';
import { HGJ, LOOKUP, PGJ, PJ } from './jacobi.ts';
import { badOption, type DecodingOptions } from './options.ts';
import { RandomStream } from './random.ts';
import { tokenSampler } from './sampling.ts';
import type { Steps } from './steps.ts';

/** One batch to decode: sources (ids, verbatim), each sentence's token cap, the plan's rules and the options. */
export interface BatchJob {
  plan: Plan;
  sources: number[][];
  maxLens: number[];
  rules: DecodingRules;
  options: DecodingOptions;
  /** With options.doSample: each sentence's random stream (runtime/decode/random.ts). */
  streams?: readonly RandomStream[] | undefined;
}

export interface DecodingStrategy {
  readonly name: string;
  /** One line for usage texts. */
  readonly summary: string;
  /** A PlancError (PLANC_E411) when the options do not fit this strategy (e.g. greedy with beamSize > 1). */
  check(o: DecodingOptions): void;
  /** A PlancError (PLANC_E411) when this plan cannot run the strategy (e.g. a Jacobi block over its step tokens). */
  checkPlan?(plan: Plan, o: DecodingOptions): void;
  /** Best tokens per row a step must see exactly (a top-k plan must keep at least this many). */
  topkNeeded(rules: DecodingRules, o: DecodingOptions): number;
  /** Decodes one batch, yielding after each decoder step; per sentence, its hypotheses best first. */
  decode(job: BatchJob): Steps<Hypothesis[][]>;
}

const GREEDY: DecodingStrategy = {
  name: 'greedy',
  summary:
    "the best allowed token each step (beamSize 1); with doSample, a token drawn from generate()'s sampling distribution",
  check(o) {
    if (o.beamSize !== 1)
      throw new PlancError(
        'PLANC_E411',
        `bad decoding option: strategy 'greedy' decodes one hypothesis, but beamSize = ${o.beamSize}; use strategy 'beam' or beamSize 1`,
        {},
        { option: 'beamSize', value: o.beamSize, expected: "1 with strategy 'greedy' (beam search decodes more)" },
      );
  },
  topkNeeded: (rules) => rules.topkNeeded(1),
  *decode({ plan, sources, maxLens, rules, options, streams }) {
    const sample = options.doSample
      ? tokenSampler(
          options,
          rules.penalty,
          streams ?? sources.map((_, i) => new RandomStream(options.seed, i)),
          options.returnScores,
        )
      : undefined;
    const hyps = yield* greedySteps(plan, sources, maxLens, rules, options.returnScores, undefined, {}, sample);
    return hyps.map((h) => [h]);
  },
};

const BEAM: DecodingStrategy = {
  name: 'beam',
  summary: "beam search with beamSize beams per sentence (generate()'s rules: early_stopping, length_penalty)",
  check() {},
  topkNeeded: (rules, o) => rules.topkNeeded(o.beamSize),
  decode: ({ plan, sources, maxLens, rules, options }) =>
    beamSteps(plan, sources, maxLens, rules, {
      k: options.beamSize,
      alpha: options.lengthPenalty,
      earlyStopping: options.earlyStopping,
    }),
};

/** Every strategy by name. */
export const STRATEGIES: ReadonlyMap<string, DecodingStrategy> = new Map(
  [GREEDY, BEAM, PJ, PGJ, HGJ, LOOKUP, HRT].map((s) => [s.name, s]),
);

/** The strategy the options name; 'auto' is greedy for beamSize 1, else beam. */
export function strategyFor(o: DecodingOptions): DecodingStrategy {
  const name = o.strategy === 'auto' ? (o.beamSize === 1 ? 'greedy' : 'beam') : o.strategy;
  const s = STRATEGIES.get(name);
  if (!s) badOption('strategy', o.strategy, `auto or one of ${[...STRATEGIES.keys()].join(', ')}`);
  s.check(o);
  return s;
}
