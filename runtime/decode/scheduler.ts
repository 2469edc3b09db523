// The serving scheduler: one decode loop per plan over one queue of sentences from every caller. Sentences join the
// running work at step boundaries in cohorts (one encoder run and one StepRunner each) and leave as soon as they end.
import { PlancError } from '../../compiler/diagnostics.ts';
import type { Plan } from '../plan.ts';
import { greedySteps, type Hypothesis } from './greedy.ts';
import type { DecodingOptions } from './options.ts';
import { badOption, maxLengthFor } from './options.ts';
import { RandomStream } from './random.ts';
import { canJoinRows } from './row-batch.ts';
import { RowLoop, type StartedRow } from './row-loop.ts';
import { tokenSampler } from './sampling.ts';
import type { Steps } from './steps.ts';
import {
  prepareDecoding,
  toResult,
  tooLong,
  truncateIds,
  type Decoding,
  type TranslationResult,
} from './translate-ids.ts';

export interface SchedulerOptions {
  /** Most rows of one cohort, i.e. of one decoder step (sentences × beams). Default and cap: the plan's maxBatch. */
  maxRows?: number;
  /** When > 0, the source tokens of all the sentences decoding at once stay within this (a sentence alone always fits). */
  batchTokens?: number;
  /** false: each submission decodes alone, one after another (no batching across callers). Default true. */
  continuous?: boolean;
  /**
   * Greedy and sampled sentences join one running batch row by row at any step when the plan allows it (it has the
   * decoder_with_past_rows graph): default true. false: they open cohorts as the other strategies do.
   */
  joinRows?: boolean;
  /** Most rows in flight over all cohorts. Default 2 × maxRows (at 64 clients of es-en, 2 × 32 used 7% less CPU per sentence than 32). */
  maxRunningRows?: number;
  /** Most cohorts decoding side by side (each costs one pass over the weights per step; rows in flight ≤ maxCohorts × maxRows). Default 4. */
  maxCohorts?: number;
  /**
   * Waiting greedy sentences start (their encoder and encoder K/V, or first step, run together, up to maxRows of them) once
   * this many wait (default maxRows / 4, at least 1), or the batch is empty, or, while it is under half full, ...
   * Started sentences join the running batch at the next step with a free row.
   */
  minJoinRows?: number;
  /** A cohort opens beside running ones once this many rows wait (default maxRows / 2, at least 1)... */
  minCohortRows?: number;
  /** ...or once the oldest waiting sentence has waited this long (both). Default 20 ms. */
  maxWaitMs?: number;
  /**
   * The row batch's starts (encoder and encoder K/V) and decoder steps run on the runtime's worker thread while the
   * event loop serves sockets and queues. Default false: on 2 cores (es-en, 64 clients, quiet machine) it cost 15-17%
   * of the throughput, since the event loop's work then competes with the kernels' threads for the cores.
   */
  asyncSteps?: boolean;
  /** Hears of every decoder step: the rows it ran, its wall time, and whether it was a cohort's first (encoder included). */
  onStep?(rows: number, ms: number, first: boolean): void;
  /** Hears of every start of sentences that join the running batch: how many started, and its wall time (encoder and encoder K/V, or first step). */
  onStart?(sentences: number, ms: number): void;
  /** Hears of every join into the row batch: the sentences that joined and the rows that were decoding already. */
  onJoin?(joined: number, running: number): void;
}

/** One sentence's outcome: its index in the submission, and its result or the error it failed with alone. */
export type SentenceOutcome =
  | { index: number; result: TranslationResult; error?: undefined }
  | { index: number; result?: undefined; error: Error };

export interface SubmitOptions {
  /** Called with each sentence's outcome as soon as it is known (any order). */
  onOutcome?(o: SentenceOutcome): void;
  /** Aborting drops the submission's queued sentences at once and its running ones at the next step boundary. */
  signal?: AbortSignal;
}

/** One submission: its decoding set-up, the outcomes so far and how many are missing. */
interface Group {
  decoding: Decoding;
  /** Sentences of one key may share a cohort. */
  key: string;
  outcomes: SentenceOutcome[];
  left: number;
  cancelled: boolean;
  resolve(o: SentenceOutcome[]): void;
  onOutcome?(o: SentenceOutcome): void;
}

interface Pending {
  group: Group;
  index: number;
  source: number[];
  maxLen: number;
  /** Rows it takes: its beams. */
  rows: number;
  since: number;
  done: boolean;
  /** It has started (encoder and encoder K/V, or first step): it waits to join the row batch as this row. */
  started?: StartedRow<Pending>;
}

interface Cohort {
  members: Pending[];
  steps: Steps<Hypothesis[][] | Hypothesis[]>;
  /** Greedy cohorts answer rows as they end; the others at their end. */
  greedy: boolean;
  /** Steps taken (the first runs the encoder and the first decoder steps). */
  stepsTaken: number;
}

/** The error of a sentence dropped because its caller went away. */
export const cancelledError = (): PlancError =>
  new PlancError(
    'PLANC_E704',
    'the request was cancelled (client gone or deadline passed) before this sentence was translated',
  );

/** The options as a cache key; undefined where JSON cannot say them (a BigInt, a cycle: prepareDecoding judges those). */
function optionsKey(options: Partial<DecodingOptions>): string | undefined {
  try {
    return JSON.stringify(options);
  } catch {
    return undefined;
  }
}

/** The options that decide how a step's tokens are chosen: sentences that agree on them may share a cohort. */
function cohortKey(d: Decoding): string {
  const { o } = d;
  return JSON.stringify([
    d.strategy.name,
    o.beamSize,
    o.lengthPenalty,
    o.earlyStopping,
    o.minNewTokens,
    o.noRepeatNgramSize,
    o.encoderNoRepeatNgramSize,
    o.repetitionPenalty,
    o.doSample,
    o.temperature,
    o.topK,
    o.topP,
    o.returnScores,
    o.returnAlternatives,
    o.targetLang,
    o.jacobiBlock,
    o.chunk,
    o.natBeams,
  ]);
}

export class Scheduler {
  private readonly queue: Pending[] = [];
  private readonly cohorts: Cohort[] = [];
  /** The running batch greedy sentences join row by row (when the plan has the per-row step graph). */
  private rowLoop?: RowLoop<Pending>;
  /** Whether greedy sentences join rows of one running batch (else they open cohorts). */
  private readonly joinsRowsOk: boolean;
  /** Whose turn the next step is: the row loop (-1) or cohort k. */
  private turn = -1;
  private looping = false;
  private closed = false;
  private idle: (() => void)[] = [];
  /** prepareDecoding's result and cohort key by the options' JSON (a server's requests repeat a few option sets). */
  private readonly prepared = new Map<string, { decoding: Decoding; key: string }>();
  readonly maxRows: number;
  private readonly opts: Required<Omit<SchedulerOptions, 'onStep' | 'onStart' | 'onJoin'>> &
    Pick<SchedulerOptions, 'onStep' | 'onStart' | 'onJoin'>;

  constructor(
    readonly plan: Plan,
    options: SchedulerOptions = {},
  ) {
    const planRows = plan.header.profile.maxBatch;
    const maxRows = Math.min(options.maxRows ?? planRows, planRows);
    if (!Number.isInteger(maxRows) || maxRows < 1)
      throw new PlancError(
        'PLANC_E302',
        `scheduler: maxRows must be an integer in [1, ${planRows}] (the plan's maxBatch), got ${options.maxRows}`,
      );
    this.maxRows = maxRows;
    this.opts = {
      maxRows,
      maxRunningRows: options.maxRunningRows ?? 2 * maxRows,
      batchTokens: options.batchTokens ?? 0,
      continuous: options.continuous ?? true,
      maxCohorts: options.maxCohorts ?? 4,
      minCohortRows: options.minCohortRows ?? Math.max(1, Math.floor(maxRows / 2)),
      maxWaitMs: options.maxWaitMs ?? 20,
      onStep: options.onStep,
      onStart: options.onStart,
      onJoin: options.onJoin,
      joinRows: options.joinRows ?? true,
      asyncSteps: options.asyncSteps ?? false,
      minJoinRows: options.minJoinRows ?? Math.max(1, Math.floor(maxRows / 4)),
    };
    this.joinsRowsOk = this.opts.continuous && this.opts.joinRows && canJoinRows(plan);
  }

  /** Sentences waiting to start. */
  get queued(): number {
    return this.queue.length;
  }

  /** Rows decoding now (sentences × beams not yet finished). */
  get runningRows(): number {
    let n = this.rowLoop?.rows ?? 0;
    for (const c of this.cohorts) for (const m of c.members) if (!m.done) n += m.rows;
    return n;
  }

  /** Sentences that have started, waiting in the queue to join the row batch. */
  get startedWaiting(): number {
    return this.rowLoop?.waiting ?? 0;
  }

  /** Cohorts decoding now. */
  get cohortCount(): number {
    return this.cohorts.length;
  }

  /**
   * Queues sentences (source ids, verbatim) under one set of options and resolves with every sentence's outcome in
   * input order. Bad options reject (nothing is queued); a sentence that cannot be decoded (over the plan's length
   * limit, ids out of range) fails alone; an empty source gives an empty translation.
   */
  async submit(
    sources: number[][],
    options: Partial<DecodingOptions> = {},
    sub: SubmitOptions = {},
  ): Promise<SentenceOutcome[]> {
    if (this.closed) throw new PlancError('PLANC_E702', 'the server is shutting down and takes no new work');
    const { decoding, key } = await this.prepare(options);
    const { o, rules } = decoding;
    if (o.sampleIndices !== undefined && o.sampleIndices.length !== sources.length)
      badOption('sampleIndices', `${o.sampleIndices.length} indices`, `one index per sentence (${sources.length})`);
    const prof = this.plan.header.profile;
    const vocab = this.plan.header.decoding.vocabSize ?? 0;
    return new Promise<SentenceOutcome[]>((resolve) => {
      const group: Group = {
        decoding,
        key,
        outcomes: new Array(sources.length),
        left: sources.length,
        cancelled: false,
        resolve,
        onOutcome: sub.onOutcome,
      };
      const now = performance.now();
      const pending: Pending[] = [];
      sources.forEach((raw, index) => {
        const bad = raw.findIndex((v) => !Number.isInteger(v) || v < 0 || (vocab > 0 && v >= vocab));
        if (bad >= 0)
          return this.settle(group, {
            index,
            error: new PlancError(
              'PLANC_E405',
              `id ${raw[bad]} at position ${bad} is not a token id of this plan (integers in [0, ${vocab}))`,
            ),
          });
        const source = o.truncate ? truncateIds(raw, prof.maxSrcLen, rules) : raw;
        if (source.length > prof.maxSrcLen)
          return this.settle(group, { index, error: tooLong('the source', source.length, prof.maxSrcLen) });
        if (source.length === 0)
          return this.settle(group, { index, result: o.returnScores ? { ids: [], score: 0 } : { ids: [] } });
        pending.push({
          group,
          index,
          source,
          maxLen: maxLengthFor(o, source.length, prof.maxTgtLen),
          rows: o.beamSize,
          since: now,
          done: false,
        });
      });
      if (group.left === 0) return resolve(group.outcomes);
      if (pending.some((p) => p.rows > this.maxRows)) {
        for (const p of pending)
          this.settle(group, {
            index: p.index,
            error: new PlancError(
              'PLANC_E411',
              `bad decoding option: beamSize = ${o.beamSize}; it must be in [1, ${this.maxRows}] (the rows this server decodes at once)`,
            ),
          });
        return;
      }
      sub.signal?.addEventListener('abort', () => this.cancel(group), { once: true });
      if (sub.signal?.aborted) return this.cancel(group);
      this.queue.push(...pending);
      if (!this.looping) void this.loop();
    });
  }

  /** Takes no new submissions; resolves when every queued and running sentence has its outcome. */
  drain(): Promise<void> {
    this.closed = true;
    if (!this.looping && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** prepareDecoding and cohortKey of `options`, once per distinct set (per-sentence sampleIndices are not kept). */
  private async prepare(options: Partial<DecodingOptions>): Promise<{ decoding: Decoding; key: string }> {
    const id = options.sampleIndices === undefined ? optionsKey(options) : undefined;
    const known = id === undefined ? undefined : this.prepared.get(id);
    if (known) return known;
    const decoding = await prepareDecoding(this.plan, options);
    const p = { decoding, key: cohortKey(decoding) };
    if (id !== undefined) {
      if (this.prepared.size >= 64) this.prepared.clear();
      this.prepared.set(id, p);
    }
    return p;
  }

  private settle(group: Group, outcome: SentenceOutcome): void {
    if (group.outcomes[outcome.index] !== undefined) return;
    group.outcomes[outcome.index] = outcome;
    group.left--;
    group.onOutcome?.(outcome);
    if (group.left === 0) group.resolve(group.outcomes);
  }

  /** Drops a submission: its queued sentences now, its running greedy rows at the next step boundary. */
  private cancel(group: Group): void {
    if (group.cancelled || group.left === 0) return;
    group.cancelled = true;
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const p = this.queue[i]!;
      if (p.group !== group) continue;
      this.queue.splice(i, 1);
      p.started?.drop();
      p.done = true;
      this.settle(group, { index: p.index, error: cancelledError() });
    }
  }

  /**
   * Steps one cohort at a time, returning to the event loop after each: a worker's queue I/O and a server's sockets
   * are heard between cohorts' steps, not only once every cohort has stepped (with 4 cohorts each hop of a request
   * waited up to 4 steps).
   */
  private async loop(): Promise<void> {
    this.looping = true;
    try {
      while (this.queue.length > 0 || this.cohorts.length > 0 || (this.rowLoop?.rows ?? 0) > 0) {
        const joining = this.admitRows();
        if (joining) await joining;
        this.admit();
        const running = this.stepNext();
        if (running) await running;
        else await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } finally {
      this.looping = false;
      if (this.queue.length > 0) void this.loop();
      else for (const f of this.idle.splice(0)) f();
    }
  }

  /** One step of whoever's turn it is: the row batch once per round, then each cohort. A row step off the event loop returns its promise. */
  private stepNext(): Promise<void> | undefined {
    if (this.turn >= this.cohorts.length) this.turn = -1;
    if (this.turn === -1) {
      this.turn = 0;
      if ((this.rowLoop?.rows ?? 0) > 0) return this.stepRows();
    }
    if (this.turn < this.cohorts.length && !this.stepCohort(this.turn)) this.turn++;
    return undefined;
  }

  /** Whether a waiting sentence joins the row batch (greedy or sampled, on a plan that allows it) rather than a cohort. */
  private joinsRows(p: Pending): boolean {
    return this.joinsRowsOk && p.rows === 1 && p.group.decoding.strategy.name === 'greedy';
  }

  /**
   * Greedy sentences join the running batch (first come, first served, within its free rows and the token budget) once
   * the batch is empty, minJoinRows of them wait, or the oldest has waited maxWaitMs. A joiner that has not started
   * (encoder and encoder K/V, or first step) starts now, together with the waiting sentences behind it up to the plan's
   * maxBatch, sorted by length: under load the encoder runs over one long batch instead of the few rows each step
   * frees (at 64 clients of es-en, about 32 sentences a start instead of 8), and later joins only copy rows in.
   */
  private admitRows(): Promise<void> | undefined {
    if (!this.joinsRowsOk) return;
    const waiting = this.queue.filter((p) => this.joinsRows(p));
    if (waiting.length === 0) return;
    const loop = (this.rowLoop ??= new RowLoop<Pending>(this.plan, this.maxRows, this.plan.header.profile.maxTgtLen, {
      finished: (m, h) => this.finish(m, [h]),
      cancelled: (m) => {
        if (!m.group.cancelled) return false;
        this.finish(m, []);
        return true;
      },
    }));
    const free = Math.min(loop.free, this.opts.maxRunningRows - this.runningRows);
    if (free <= 0) return;
    // started sentences at the head of the queue join at once (a join of started rows only copies them in); a start
    // waits, under load (the batch at least half full), until it can serve minJoinRows joiners, and under light load
    // the oldest waits at most maxWaitMs
    const headStarted = waiting[0]!.started !== undefined;
    const ready =
      headStarted ||
      loop.rows === 0 ||
      waiting.length >= this.opts.minJoinRows ||
      (loop.rows < this.maxRows / 2 && performance.now() - waiting[0]!.since >= this.opts.maxWaitMs);
    if (!ready) return;
    let tokens = 0;
    for (const m of loop.tags) tokens += m.source.length;
    for (const c of this.cohorts) for (const m of c.members) if (!m.done) tokens += m.source.length;
    const budget = this.opts.batchTokens;
    const members: Pending[] = [];
    for (const p of waiting) {
      if (members.length >= free || (headStarted && !p.started)) break;
      if (budget > 0 && tokens + p.source.length > budget && (members.length > 0 || tokens > 0)) continue;
      members.push(p);
      tokens += p.source.length;
    }
    if (members.length === 0) return;
    const toStart = members.filter((m) => !m.started);
    if (toStart.length === 0) {
      this.joinStarted(members);
      return undefined;
    }
    const chosen = new Set(members);
    for (const p of waiting) {
      if (toStart.length >= this.maxRows) break;
      if (!p.started && !chosen.has(p)) toStart.push(p);
    }
    toStart.sort((x, y) => y.source.length - x.source.length); // the encoder runs over runs of similar lengths
    const starters = toStart.map((m) => {
      const { o, rules } = m.group.decoding;
      const sample = o.doSample
        ? tokenSampler(
            o,
            rules.penalty,
            [new RandomStream(o.seed, o.sampleIndices?.[m.index] ?? m.index)],
            o.returnScores,
          )
        : undefined;
      return { source: m.source, maxLen: m.maxLen, rules, scores: o.returnScores, sample, tag: m };
    });
    const t0 = performance.now();
    const started = (rows: (StartedRow<Pending> | undefined)[]) => {
      rows.forEach((r, i) => {
        if (r) toStart[i]!.started = r;
      });
      this.opts.onStart?.(toStart.length, performance.now() - t0);
      this.unqueue(toStart.filter((m) => m.done)); // ended at their first token, or cancelled
      this.joinStarted(members);
    };
    const failed = (e: unknown) => {
      this.unqueue(toStart);
      this.failAll(toStart, e);
    };
    if (this.opts.asyncSteps) return loop.startAsync(starters).then(started, failed);
    let rows: (StartedRow<Pending> | undefined)[];
    try {
      rows = loop.start(starters);
    } catch (e) {
      failed(e);
      return undefined;
    }
    started(rows);
    return undefined;
  }

  /** Started sentences of `members` (the others ended or failed) leave the queue and join the row batch. */
  private joinStarted(members: Pending[]): void {
    const joiners = members.filter((m) => m.started && !m.done);
    this.unqueue(joiners);
    try {
      const running = this.rowLoop!.rows;
      this.rowLoop!.join(joiners.map((m) => m.started!));
      this.opts.onJoin?.(this.rowLoop!.rows - running, running);
    } catch (e) {
      this.failAll(joiners, e);
    }
  }

  /** Every sentence of `list` that has no outcome yet fails with `e`. */
  private failAll(list: Pending[], e: unknown): void {
    for (const m of list) {
      if (m.done) continue;
      m.done = true;
      this.settle(m.group, { index: m.index, error: e as Error });
    }
  }

  /** Takes these sentences out of the queue. */
  private unqueue(list: Pending[]): void {
    if (list.length === 0) return;
    const taken = new Set(list);
    for (let i = this.queue.length - 1; i >= 0; i--) if (taken.has(this.queue[i]!)) this.queue.splice(i, 1);
  }

  /** One step of the row batch; if it fails, its sentences fail and the batch starts afresh. */
  private stepRows(): Promise<void> | undefined {
    const loop = this.rowLoop!;
    const rows = loop.rows;
    const t0 = performance.now();
    const done = () => this.opts.onStep?.(rows, performance.now() - t0, false);
    const failed = (e: unknown) => {
      this.failAll(loop.tags, e);
      loop.close();
      this.rowLoop = undefined;
    };
    if (this.opts.asyncSteps) return loop.stepAsync().then(done, failed);
    try {
      loop.step();
      done();
    } catch (e) {
      failed(e);
    }
    return undefined;
  }

  /** Whether the waiting sentences open a cohort now (first come, first served; see SchedulerOptions). */
  private shouldOpen(): boolean {
    const head = this.queue.find((p) => !this.joinsRows(p));
    if (!head || head.rows > Math.min(this.maxRows, this.opts.maxRunningRows - this.runningRows)) return false;
    if (this.cohorts.length === 0) return true;
    if (!this.opts.continuous || this.cohorts.length >= this.opts.maxCohorts) return false;
    let waiting = 0;
    for (const p of this.queue) if (!this.joinsRows(p)) waiting += p.rows;
    return waiting >= this.opts.minCohortRows || performance.now() - head.since >= this.opts.maxWaitMs;
  }

  /** Opens cohorts of up to maxRows rows for waiting sentences while the cohort count and the token budget allow. */
  private admit(): void {
    while (this.shouldOpen()) {
      const head = this.queue.find((p) => !this.joinsRows(p))!;
      let tokens = 0;
      for (const c of this.cohorts) for (const m of c.members) if (!m.done) tokens += m.source.length;
      let free = Math.min(this.maxRows, this.opts.maxRunningRows - this.runningRows);
      const members: Pending[] = [];
      for (let i = 0; i < this.queue.length && free > 0; i++) {
        const p = this.queue[i]!;
        if (this.joinsRows(p)) continue;
        const same = this.opts.continuous ? p.group.key === head.group.key : p.group === head.group;
        if (!same || p.rows > free) continue;
        const budget = this.opts.batchTokens;
        if (budget > 0 && tokens + p.source.length > budget && (members.length > 0 || tokens > 0)) continue;
        members.push(p);
        this.queue.splice(i--, 1);
        free -= p.rows;
        tokens += p.source.length;
      }
      if (members.length === 0) return;
      // longest first: the encoder runs over runs of similar lengths (encoder-groups.ts)
      members.sort((x, y) => y.source.length - x.source.length);
      this.cohorts.push(this.open(members));
    }
  }

  /** A cohort over these sentences: greedy answers each row as it ends and drops cancelled rows at once. */
  private open(members: Pending[]): Cohort {
    const { plan } = this;
    const { o, strategy, rules } = members[0]!.group.decoding;
    const sources = members.map((m) => m.source);
    const maxLens = members.map((m) => m.maxLen);
    if (strategy.name === 'greedy') {
      // sampling: each sentence's stream comes from its own submission's seed and its index there (the seed is not in
      // the cohort key: sentences of different seeds share a cohort)
      const sample = o.doSample
        ? tokenSampler(
            o,
            rules.penalty,
            members.map((m) => {
              const mo = m.group.decoding.o;
              return new RandomStream(mo.seed, mo.sampleIndices?.[m.index] ?? m.index);
            }),
            o.returnScores,
          )
        : undefined;
      const steps = greedySteps(
        plan,
        sources,
        maxLens,
        rules,
        o.returnScores,
        undefined,
        {
          finished: (i, h) => this.finish(members[i]!, [h]),
          cancelled: (i) => {
            const m = members[i]!;
            if (!m.group.cancelled) return false;
            this.finish(m, []);
            return true;
          },
        },
        sample,
      );
      return { members, steps, greedy: true, stepsTaken: 0 };
    }
    return {
      members,
      steps: strategy.decode({ plan, sources, maxLens, rules, options: o }),
      greedy: false,
      stepsTaken: 0,
    };
  }

  private finish(m: Pending, hyps: Hypothesis[]): void {
    if (m.done) return;
    m.done = true;
    const { index, group } = m;
    if (group.cancelled) this.settle(group, { index, error: cancelledError() });
    else if (hyps.length === 0)
      this.settle(group, { index, error: new Error('the decoding loop ended without a hypothesis for this sentence') });
    else this.settle(group, { index, result: toResult(hyps, group.decoding.o) });
  }

  /**
   * One decoder step of cohort k; a cohort that ends answers what is left, one that fails fails its sentences.
   * Returns whether the cohort ended (it is then removed: index k names the next one).
   */
  private stepCohort(k: number): boolean {
    const c = this.cohorts[k]!;
    let ended = false;
    const rows = c.members.reduce((n, m) => n + (m.done ? 0 : m.rows), 0);
    const t0 = performance.now();
    try {
      if (!c.greedy && c.members.every((m) => m.group.cancelled)) {
        c.steps.return([]);
        ended = true;
      } else {
        const r = c.steps.next();
        this.opts.onStep?.(rows, performance.now() - t0, c.stepsTaken++ === 0);
        if (r.done) {
          ended = true;
          if (!c.greedy) (r.value as Hypothesis[][]).forEach((hyps, i) => this.finish(c.members[i]!, hyps));
        }
      }
    } catch (e) {
      ended = true;
      this.failAll(c.members, e);
    }
    if (!ended) return false;
    for (const m of c.members) if (!m.done) this.finish(m, []);
    this.cohorts.splice(k, 1);
    return true;
  }
}
