// Runs a plan's decoder step by step for a batch: encoder, first step, then decoder_with_past with the caches carried.
import { PlancError } from '../../compiler/diagnostics.ts';
import { fail } from '../../compiler/diagnostics-catalog.ts';
import type { Plan } from '../plan.ts';
import type { FeedTensor, Resident, ResidentTensor, RtData, RtDType, RtTensor } from '../tensor.ts';
import { vocabFeeds } from '../vocab.ts';
import { bufferPool, Lease } from './buffer-pool.ts';
import { EncoderState } from './encoder-state.ts';
import { hasInPlaceCache, KVCaches } from './kv-cache.ts';
import { checkSelection, keepsRows } from './row-spans.ts';
import { encodeInGroups, encoderGroups } from './encoder-groups.ts';
import { runRuns, runRunsSync, type GraphRuns } from './graph-runs.ts';
import { int64, sourceFeeds } from './source-feeds.ts';
import { CROSS_KV_GRAPH, POSITION_IDS_INPUT } from '../../compiler/plan/io-names.ts';

type Feeds = Record<string, RtTensor>;

/** Model ids a decoder needs. */
export interface DecodeIds {
  startId: number;
  eosId: number;
  padId: number;
}

/** Rows `rows` of a tensor whose first dim is the batch, in that order (a fresh copy). */
export function gatherRows(t: RtTensor, rows: number[]): RtTensor {
  const rowSize = t.dims[0] ? t.data.length / t.dims[0] : 0;
  const Ctor = t.data.constructor as { new (n: number): RtData };
  const data = new Ctor(rows.length * rowSize);
  rows.forEach((r, i) =>
    (data as Float32Array).set((t.data as Float32Array).subarray(r * rowSize, (r + 1) * rowSize), i * rowSize),
  );
  return { dtype: t.dtype, dims: [rows.length, ...t.dims.slice(1)], data };
}

/** Gathers the same rows of every tensor of a record. */
export function gatherAll(feeds: Feeds, rows: number[]): Feeds {
  return Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, gatherRows(v, rows)]));
}

/** The present.* outputs whose name contains `part` ('.encoder.' or '.decoder.'), renamed past_key_values.*. */
export function pastFrom(outputs: Feeds, part: string): Feeds {
  const out: Feeds = {};
  for (const [k, v] of Object.entries(outputs))
    if (k.startsWith('present.') && k.includes(part)) out[k.replace('present.', 'past_key_values.')] = v;
  return out;
}

/** The first `len` positions (axis 2) of past tensors [B, H, past, D] (a fresh copy). */
function pastPrefix(feeds: Feeds, len: number): Feeds {
  return Object.fromEntries(
    Object.entries(feeds).map(([k, t]) => {
      const [b, h, past, d] = t.dims as [number, number, number, number];
      const Ctor = t.data.constructor as { new (n: number): RtData };
      const data = new Ctor(b * h * len * d) as Float32Array;
      for (let i = 0; i < b * h; i++)
        data.set((t.data as Float32Array).subarray(i * past * d, (i * past + len) * d), i * len * d);
      return [k, { dtype: t.dtype, dims: [b, h, len, d], data }];
    }),
  );
}

/**
 * Tokens per row one decoder_with_past step takes: [n, n] for a plan whose input_ids dim 1 is the number n (1 today),
 * [1, the symbol's maximum] for a symbol (plans built for multi-token steps).
 */
export function stepTokenRange(plan: Plan): [number, number] {
  const dim = plan.inputs('decoder_with_past').find((i) => i.name === 'input_ids')?.dims[1] ?? '1';
  if (/^\d+$/.test(dim)) return [Number(dim), Number(dim)];
  return [1, plan.header.profile.symbolMax[dim] ?? Number.MAX_SAFE_INTEGER];
}

/**
 * What the encoder and the first decoder step will output for these feeds: the hidden states, the encoder K/V
 * (present.*.encoder.*, by name) and the positions of the self-attention present rows.
 */
function firstStepShapes(plan: Plan, encFeeds: Feeds, start: RtTensor, vocab: Feeds, positions: Feeds) {
  const hiddenOut = plan.outputs('encoder').find((o) => o.name === 'last_hidden_state')!;
  const hidden = { dtype: hiddenOut.dtype as RtDType, dims: plan.outputShapes('encoder', encFeeds).last_hidden_state! };
  const shapes = plan.outputShapes('decoder', {
    input_ids: start,
    encoder_attention_mask: encFeeds.attention_mask!,
    encoder_hidden_states: hidden,
    ...vocab,
    ...positions,
  });
  const presents = plan.outputs('decoder').filter((o) => o.name.startsWith('present.'));
  const kv = Object.fromEntries(
    presents
      .filter((o) => o.name.includes('.encoder.'))
      .map((o) => [o.name, { dtype: o.dtype as RtDType, dims: shapes[o.name]! }]),
  );
  const self = presents.find((o) => o.name.includes('.decoder.'));
  return { hidden, kv, positions: self ? shapes[self.name]![2]! : 1 };
}

/** Whether a graph of the plan takes position ids (an HRT model's decoders: docs/hrt.md). */
export function takesPositions(plan: Plan, graph: string): boolean {
  return plan.graphs.includes(graph) && plan.inputs(graph).some((i) => i.name === POSITION_IDS_INPUT);
}

/** Options of a StepRunner beyond the batch. */
export interface StepRunnerOptions {
  /**
   * A plan whose decoders take position_ids gets position (cached length) × positionStride for each new token: 0, 1, 2,
   * … by default; 0, k, 2k, … for HRT's Skip-AT with chunk k. Plans without that input ignore it.
   */
  positionStride?: number;
  /**
   * Run the plan's decoder_cross_kv (the first step cut to its encoder K/V) instead of the first decoder step: the
   * caches start empty (length 0), `out` stays empty, and the first token comes from a later step at past length 0
   * (a row batch the rows join: runtime/decode/row-loop.ts). Needs in-place caches and that graph.
   */
  encoderKvOnly?: boolean;
}

/**
 * One batch's decoder state. `out` holds the last step's outputs (logits, or topk_logprobs/topk_ids of a plan with
 * planc.ProjectTopK). `select(rows)` says which rows the next step continues; `step(tokens)` runs it; `truncate(len)`
 * rolls the cached length back. The encoder mask and K/V live in resident buffers of the plan (device memory on
 * cuda); with an in-place cache plan so do the self-attention caches (KVCaches), so a step moves only its tokens, the
 * past length and its outputs between JS and the plan; otherwise past/present self-attention tensors are carried in JS.
 * The buffers are leased from the plan's pool and go back to it on release() (or when the runner is collected).
 */
export class StepRunner {
  out: Feeds = {};
  /** The encoder and first-step runs (done by the constructor, or by start()). */
  private readonly firstRuns: GraphRuns;
  private readonly source: EncoderState;
  private decKV: Feeds = {};
  private readonly caches?: KVCaches;
  private rows: number;
  /** Positions of the carried past (plans without in-place caches). */
  private pastLength = 0;
  private readonly tokenRange: [number, number];
  private readonly lease: Lease;
  private released = false;
  /** Position stride of the position_ids feeds, 0 when the plan's step takes none. */
  private readonly stride: number;

  /**
   * maxRows: the most rows a step will run (beams × sentences); capacity: the most tokens a row will hold. The encoder
   * and the first decoder step run here, unless deferFirst (StepRunner.start runs them off the event loop).
   */
  constructor(
    private readonly plan: Plan,
    sources: number[][],
    d: DecodeIds,
    maxRows: number,
    capacity: number,
    opts: StepRunnerOptions = {},
    deferFirst = false,
  ) {
    const { ids, mask } = sourceFeeds(sources, d.padId);
    const b = sources.length;
    const rows = Math.max(maxRows, b);
    this.rows = b;
    this.tokenRange = stepTokenRange(plan);
    this.lease = new Lease(bufferPool(plan), this);
    const take = (bytes: number) => this.lease.take(bytes);
    const encFeeds = { input_ids: ids, attention_mask: mask };
    const vocab = vocabFeeds(plan.header, sources);
    const start = int64(b, 1, new Array<number>(b).fill(d.startId));
    this.stride = takesPositions(plan, 'decoder_with_past') ? (opts.positionStride ?? 1) : 0;
    const startPositions: Feeds = takesPositions(plan, 'decoder')
      ? { [POSITION_IDS_INPUT]: int64(b, 1, new Array<number>(b).fill(0)) }
      : {};
    const { hidden, kv, positions } = firstStepShapes(plan, encFeeds, start, vocab, startPositions);
    this.source = new EncoderState(plan, rows, mask, hidden, kv, vocab, take);
    const first = {
      input_ids: start,
      encoder_attention_mask: this.source.mask(),
      encoder_hidden_states: this.source.hidden(),
      ...this.source.vocab(),
      ...startPositions,
    };
    if (hasInPlaceCache(plan)) this.caches = new KVCaches(plan, rows, capacity, take);
    if (opts.encoderKvOnly && !(this.caches && plan.graphs.includes(CROSS_KV_GRAPH)))
      throw new PlancError(
        'PLANC_E405',
        `this plan cannot start sentences with their encoder K/V alone (it needs in-place caches and a '${CROSS_KV_GRAPH}' graph)`,
      );
    const firstGraph = opts.encoderKvOnly ? CROSS_KV_GRAPH : 'decoder';
    this.firstRuns = this.encodeAndStart(sources, d.padId, encFeeds, firstGraph, first, positions, take);
    if (!deferFirst) runRunsSync(plan, this.firstRuns);
  }

  /**
   * A runner whose encoder and first decoder step run off the event loop (plan.run): what the constructor does,
   * without blocking (a server hears its sockets meanwhile). Nothing may touch the plan until it resolves.
   */
  static async start(
    plan: Plan,
    sources: number[][],
    d: DecodeIds,
    maxRows: number,
    capacity: number,
    opts: StepRunnerOptions = {},
  ): Promise<StepRunner> {
    const runner = new StepRunner(plan, sources, d, maxRows, capacity, opts, true);
    try {
      await runRuns(plan, runner.firstRuns);
    } catch (e) {
      runner.release();
      throw e;
    }
    return runner;
  }

  /** The encoder (in groups of similar lengths) and the first decoder step (or its cut, decoder_cross_kv), as runs. */
  private *encodeAndStart(
    sources: number[][],
    padId: number,
    encFeeds: Feeds,
    firstGraph: string,
    first: Record<string, FeedTensor>,
    positions: number,
    take: (bytes: number) => Resident,
  ): GraphRuns {
    const groups = encoderGroups(sources.map((x) => x.length));
    if (groups.length === 1)
      yield { graph: 'encoder', feeds: encFeeds, into: { last_hidden_state: this.source.hidden() } };
    else yield* encodeInGroups(this.plan, sources, padId, groups, this.source.hidden(), take);
    const b = sources.length;
    if (firstGraph === CROSS_KV_GRAPH) {
      // the first step's feeds that its cut still reads (the caches stay empty: length 0)
      const feeds = Object.fromEntries(this.plan.inputs(CROSS_KV_GRAPH).map((i) => [i.name, first[i.name]!]));
      yield { graph: CROSS_KV_GRAPH, feeds, into: this.source.presentSlots() };
    } else if (this.caches) {
      this.out = yield {
        graph: 'decoder',
        feeds: first,
        into: { ...this.source.presentSlots(), ...this.caches.presentSlots(b, positions) },
      };
      this.caches.fill(b, positions);
    } else {
      this.out = yield { graph: 'decoder', feeds: first, into: this.source.presentSlots() };
      this.decKV = pastFrom(this.out, '.decoder.');
      this.pastLength = Object.values(this.decKV)[0]?.dims[2] ?? 1;
    }
  }

  /** Positions cached per row: the start token plus every token stepped (less what truncate rolled back). */
  get length(): number {
    return this.caches ? this.caches.length : this.pastLength;
  }

  /**
   * The next step continues rows `from` of this one (row i ← from[i]). The encoder mask and K/V rows are gathered too
   * unless `sameSources` says each row keeps the source it had (beams of one sentence share them).
   */
  select(from: number[], sameSources = false): void {
    this.live();
    if (keepsRows(from, this.rows)) return;
    checkSelection(from, this.rows, this.source.maxRows);
    if (!sameSources) this.source.select(from);
    if (this.caches) this.caches.select(from);
    else this.decKV = gatherAll(this.decKV, from);
    this.rows = from.length;
  }

  /**
   * Runs decoder_with_past on one token per row (number[]) or on n tokens per row (number[][], the same n for every
   * row, as far as the plan's input_ids allow: stepTokenRange); the cached length grows by n.
   */
  step(tokens: number[] | number[][]): void {
    this.live();
    const perRow = tokens.map((t) => (Array.isArray(t) ? t : [t]));
    const n = perRow[0]?.length ?? 1;
    if (perRow.some((t) => t.length !== n))
      throw new PlancError(
        'PLANC_E405',
        `step: every row must take the same number of tokens (row 0 has ${n}, row ${perRow.findIndex((t) => t.length !== n)} has another)`,
      );
    const [lo, hi] = this.tokenRange;
    if (n < lo || n > hi) {
      const takes = lo === hi ? `exactly ${lo} token${lo === 1 ? '' : 's'}` : `${lo} to ${hi} tokens`;
      throw new PlancError(
        'PLANC_E405',
        `step: ${n} tokens per row, but this plan's decoder_with_past takes ${takes} per row (its input_ids dims); optimize the plan for multi-token steps to step more`,
      );
    }
    if (perRow.length !== this.rows)
      throw new PlancError(
        'PLANC_E405',
        `step: ${perRow.length} rows of tokens, but the batch has ${this.rows} (select the rows first)`,
      );
    if (this.caches && this.caches.length + n > this.caches.capacity) {
      throw new PlancError(
        'PLANC_E405',
        `step: ${this.caches.length} cached positions + ${n} exceed the cache capacity ${this.caches.capacity} this batch was set up with`,
      );
    }
    const base: Record<string, FeedTensor> = { input_ids: int64(this.rows, n, perRow.flat()), ...this.source.feeds() };
    if (this.stride)
      base[POSITION_IDS_INPUT] = int64(
        this.rows,
        n,
        perRow.flatMap(() => Array.from({ length: n }, (_, j) => (this.length + j) * this.stride)),
      );
    if (this.caches) {
      this.out = this.plan.runSync('decoder_with_past', { ...base, ...this.caches.feeds() });
      this.caches.length += n;
    } else {
      this.out = this.plan.runSync('decoder_with_past', { ...base, ...this.decKV });
      this.decKV = pastFrom(this.out, '.decoder.');
      this.pastLength += n;
    }
  }

  /** The encoder's output for the batch's sources in their original order (written once; not gathered by select). */
  encoderOutput(): ResidentTensor {
    this.live();
    return this.source.hidden();
  }

  /**
   * The resident state of the rows (encoder side and in-place caches) for a batch they join (runtime/decode/row-batch.ts);
   * undefined without in-place caches.
   */
  joinState(): { source: EncoderState; caches: KVCaches } | undefined {
    this.live();
    return this.caches ? { source: this.source, caches: this.caches } : undefined;
  }

  /**
   * Rolls the cached length back to len ≤ length: the next step continues from position len (the positions beyond are
   * overwritten). `out` keeps the last step's outputs until the next step.
   */
  truncate(len: number): void {
    this.live();
    if (this.caches) {
      this.caches.truncate(len);
      return;
    }
    if (!Number.isInteger(len) || len < 0 || len > this.pastLength)
      throw new PlancError(
        'PLANC_E405',
        `truncate: length ${len} must be an integer in [0, ${this.pastLength}] (the positions cached)`,
      );
    if (len < this.pastLength) this.decKV = pastPrefix(this.decKV, len);
    this.pastLength = len;
  }

  /** Gives the batch's resident buffers back to the plan's pool (else garbage collection does); the runner is done. */
  release(): void {
    this.released = true;
    this.lease.give();
  }

  private live(): void {
    if (this.released)
      fail('closed', { what: 'StepRunner', how: 'released: its buffers went back to the plan for other batches' });
  }
}
