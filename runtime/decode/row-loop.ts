// Greedy decoding where sentences join and leave one running batch at any step (RowBatch): the serving scheduler's
// loop for greedy and sampled requests. Each row chooses its tokens exactly as greedySteps does for it alone.
import type { Plan } from '../plan.ts';
import type { DecodingRules } from './conventions.ts';
import { greedyToken, type Hypothesis } from './greedy.ts';
import { RowBatch } from './row-batch.ts';
import type { SampleToken } from './sampling.ts';
import { StepRunner, type StepRunnerOptions } from './step-runner.ts';
import { CROSS_KV_GRAPH } from '../../compiler/plan/io-names.ts';
import { PlancError } from '../../compiler/diagnostics.ts';

/** A sentence to decode: its source ids, its token cap, its rules and scoring, and what the caller knows it by. */
export interface RowMember<T> {
  source: number[];
  maxLen: number;
  rules: DecodingRules;
  scores: boolean;
  /** Draws the unforced tokens (sampling), as sentence 0 of the sampler. */
  sample?: SampleToken;
  tag: T;
}

/** What the loop tells its caller: a sentence ended (with its hypothesis), and asks: is this sentence still wanted? */
export interface RowLoopHooks<T> {
  finished(tag: T, h: Hypothesis): void;
  cancelled(tag: T): boolean;
}

interface Row<T> {
  m: RowMember<T>;
  h: Hypothesis;
  t: number;
  next: number;
}

/** A runner whose sentences ran their encoder and first step together, and how many of them have yet to join (or be dropped). */
class StartedBatch {
  constructor(
    readonly runner: StepRunner,
    public left: number,
    readonly loop: { waiting: number },
  ) {}

  /** One of its rows joined or was dropped; the runner goes back to the pool with the last. */
  done(): void {
    if (--this.left === 0) this.runner.release();
  }
}

/**
 * A sentence that has started (RowLoop.start: its encoder, then its encoder K/V or its first step and first token): it
 * waits to join the running batch as row `j` of its batch's runner.
 */
export class StartedRow<T> {
  /** @internal */
  constructor(
    readonly batch: StartedBatch,
    readonly j: number,
    readonly row: Row<T>,
  ) {}

  get tag(): T {
    return this.row.m.tag;
  }

  private ended = false;

  /** It joined, or will not (its caller went away): its row of the runner is given up (once). */
  drop(): void {
    if (this.ended) return;
    this.ended = true;
    this.batch.loop.waiting--;
    this.batch.done();
  }
}

export class RowLoop<T> {
  private readonly batch: RowBatch;
  private live: Row<T>[] = [];

  constructor(
    private readonly plan: Plan,
    readonly maxRows: number,
    capacity: number,
    private readonly hooks: RowLoopHooks<T>,
  ) {
    this.batch = new RowBatch(plan, maxRows, capacity);
  }

  /** Rows decoding now. */
  get rows(): number {
    return this.live.length;
  }

  /** Started sentences that have neither joined nor been dropped (each holds a row of its runner). */
  waiting = 0;

  /** Rows free for new sentences. */
  get free(): number {
    return this.maxRows - this.live.length;
  }

  /** Tags of the sentences decoding now. */
  get tags(): T[] {
    return this.live.map((r) => r.m.tag);
  }

  /**
   * Runs the encoder and the encoder K/V (or first decoder step, choosing first tokens) of new sentences (at most the
   * plan's maxBatch) together: one entry per member, a StartedRow to join() now or later, or undefined for a sentence
   * that ended there (or is no longer wanted; the hooks heard of it). Starting more sentences than will join at once lets the
   * encoder run over a longer batch, sorted by length, than the few rows a step frees.
   */
  start(members: RowMember<T>[]): (StartedRow<T> | undefined)[] {
    if (members.length === 0) return [];
    return this.started(
      members,
      new StepRunner(
        this.plan,
        members.map((m) => m.source),
        members[0]!.rules.c,
        members.length,
        1,
        this.startWith,
      ),
    );
  }

  /**
   * How sentences start: with their encoder K/V alone where the plan has decoder_cross_kv (their first token then comes
   * from the batch's next step, at past length 0, computed as the first step computes it), else with a first step.
   */
  private get startWith(): StepRunnerOptions {
    return { encoderKvOnly: this.plan.graphs.includes(CROSS_KV_GRAPH) };
  }

  /** start() with the encoder and first step off the event loop (StepRunner.start): nothing may step until it resolves. */
  async startAsync(members: RowMember<T>[]): Promise<(StartedRow<T> | undefined)[]> {
    if (members.length === 0) return [];
    return this.started(
      members,
      await StepRunner.start(
        this.plan,
        members.map((m) => m.source),
        members[0]!.rules.c,
        members.length,
        1,
        this.startWith,
      ),
    );
  }

  /**
   * The started rows of a runner: after a first step, each row's first token is chosen here; after the encoder K/V
   * alone (nothing cached), each row goes on with the decoder start token and chooses its first token in the batch.
   */
  private started(members: RowMember<T>[], runner: StepRunner): (StartedRow<T> | undefined)[] {
    const batch = new StartedBatch(runner, 1, this);
    const firstStepRan = runner.length > 0;
    try {
      return members.map((m, j) => {
        if (this.hooks.cancelled(m.tag)) return undefined;
        const h: Hypothesis = { ids: [], logProb: 0, length: 0 };
        if (!firstStepRan) {
          batch.left++;
          this.waiting++;
          return new StartedRow(batch, j, { m, h, t: 0, next: m.rules.c.startId });
        }
        const tok = greedyToken(runner.out, j, 0, 0, m.maxLen, h, m.source, m.rules, m.scores, undefined, m.sample);
        if (tok === undefined) {
          this.hooks.finished(m.tag, h);
          return undefined;
        }
        batch.left++;
        this.waiting++;
        return new StartedRow(batch, j, { m, h, t: 1, next: tok });
      });
    } finally {
      batch.done(); // the hold taken while the tokens were chosen (the runner is released here if no row goes on)
    }
  }

  /**
   * Started sentences join the running batch (at most `free` of them), in the order given; those no longer wanted
   * are dropped instead. Rows of one runner are copied in together.
   */
  join(rows: StartedRow<T>[]): void {
    if (rows.length > this.free)
      throw new PlancError('PLANC_E405', `join: ${rows.length} sentences, but ${this.free} rows are free`);
    const byBatch = new Map<StartedBatch, StartedRow<T>[]>();
    for (const s of rows) {
      if (this.hooks.cancelled(s.tag)) {
        s.drop();
        continue;
      }
      const list = byBatch.get(s.batch) ?? [];
      list.push(s);
      byBatch.set(s.batch, list);
    }
    try {
      for (const [batch, list] of byBatch) {
        this.batch.join(
          batch.runner,
          list.map((s) => s.j),
          list.map((s) => s.row.m.source.length),
        );
        this.live.push(...list.map((s) => s.row));
      }
    } finally {
      for (const list of byBatch.values()) for (const s of list) s.drop();
    }
  }

  /** One decoder step of every row; rows that end (or are no longer wanted) leave the batch. */
  step(): void {
    if (this.live.length === 0) return;
    this.batch.step(this.live.map((r) => r.next));
    this.advance();
  }

  /** step() with the decoder run off the event loop (RowBatch.stepAsync): nothing may join or step until it resolves. */
  async stepAsync(): Promise<void> {
    if (this.live.length === 0) return;
    await this.batch.stepAsync(this.live.map((r) => r.next));
    this.advance();
  }

  /**
   * Chooses each row's next token from the step's outputs; rows that end (or are no longer wanted) leave, and the last
   * rows that go on move into their places.
   */
  private advance(): void {
    const goesOn = this.live.map((row, r) => {
      if (this.hooks.cancelled(row.m.tag)) return false;
      const { m, h } = row;
      const tok = greedyToken(
        this.batch.out,
        r,
        0,
        row.t,
        m.maxLen,
        h,
        m.source,
        m.rules,
        m.scores,
        undefined,
        m.sample,
      );
      if (tok === undefined) {
        this.hooks.finished(m.tag, h);
        return false;
      }
      row.t++;
      row.next = tok;
      return true;
    });
    const count = goesOn.filter((x) => x).length;
    const tail = goesOn.flatMap((x, r) => (x && r >= count ? [r] : []));
    const keep = goesOn.slice(0, count).map((x, i) => (x ? i : tail.pop()!));
    this.batch.leave(keep);
    this.live = keep.map((r) => this.live[r]!);
  }

  /** Frees the batch's buffers. */
  close(): void {
    this.batch.close();
  }
}
