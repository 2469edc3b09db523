// Greedy decoding where sentences join and leave one running batch at any step (RowBatch): the serving scheduler's
// loop for greedy and sampled requests. Each row chooses its tokens exactly as greedySteps does for it alone.
import type { Plan } from '../plan.ts';
import type { DecodingRules } from './conventions.ts';
import { greedyToken, type Hypothesis } from './greedy.ts';
import { RowBatch } from './row-batch.ts';
import type { SampleToken } from './sampling.ts';
import { StepRunner } from './step-runner.ts';

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

interface Row<T> { m: RowMember<T>; h: Hypothesis; t: number; next: number }

export class RowLoop<T> {
  private readonly batch: RowBatch;
  private live: Row<T>[] = [];

  constructor(private readonly plan: Plan, readonly maxRows: number, capacity: number, private readonly hooks: RowLoopHooks<T>) {
    this.batch = new RowBatch(plan, maxRows, capacity);
  }

  /** Rows decoding now. */
  get rows(): number { return this.live.length; }

  /** Sentences whose join (joinAsync) is under way: they hold rows already. */
  joining = 0;

  /** Rows free for new sentences. */
  get free(): number { return this.maxRows - this.live.length - this.joining; }

  /** Tags of the sentences decoding now. */
  get tags(): T[] { return this.live.map((r) => r.m.tag); }

  /**
   * Runs the encoder and first decoder step of new sentences (at most `free` of them) and chooses their first tokens;
   * those that go on join the running batch.
   */
  join(members: RowMember<T>[]): void {
    if (members.length === 0) return;
    this.joined(members, new StepRunner(this.plan, members.map((m) => m.source), members[0]!.rules.c, members.length, 1));
  }

  /** join() with the encoder and first step off the event loop (StepRunner.start): nothing may step until it resolves. */
  async joinAsync(members: RowMember<T>[]): Promise<void> {
    if (members.length === 0) return;
    this.joining = members.length;
    let runner: StepRunner;
    try {
      runner = await StepRunner.start(this.plan, members.map((m) => m.source), members[0]!.rules.c, members.length, 1);
    } finally {
      this.joining = 0;
    }
    this.joined(members, runner);
  }

  /** Chooses the first tokens from a runner that ran the new sentences' first step; those that go on join. */
  private joined(members: RowMember<T>[], runner: StepRunner): void {
    try {
      const keep: number[] = [];
      const rows: Row<T>[] = [];
      members.forEach((m, j) => {
        if (this.hooks.cancelled(m.tag)) return;
        const h: Hypothesis = { ids: [], logProb: 0, length: 0 };
        const tok = greedyToken(runner.out, j, 0, 0, m.maxLen, h, m.source, m.rules, m.scores, undefined, m.sample);
        if (tok === undefined) return this.hooks.finished(m.tag, h);
        keep.push(j);
        rows.push({ m, h, t: 1, next: tok });
      });
      if (keep.length === 0) return;
      runner.select(keep);
      this.batch.join(runner, keep.length);
      this.live.push(...rows);
    } finally {
      runner.release();
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
      const tok = greedyToken(this.batch.out, r, 0, row.t, m.maxLen, h, m.source, m.rules, m.scores, undefined, m.sample);
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
  close(): void { this.batch.close(); }
}
