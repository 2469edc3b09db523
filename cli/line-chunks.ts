// Lines of a stream in chunks for translation: a chunk is ready when full, when the input pauses, or at the end.
import * as readline from 'node:readline';

export interface ChunkPolicy {
  /** A chunk is ready once this many lines wait. */
  full: number;
  /** The most lines in one chunk. */
  max: number;
  /** Lines that waited this long without a new line arriving are ready too (an interactive pipe gets each answer). */
  idleMs: number;
}

/** Reads lines (`\n` or `\r\n`; a last line without a newline counts) and hands them out in chunks, in order. */
export class LineChunks {
  private readonly pending: string[] = [];
  private ended = false;
  private failure: Error | undefined;
  private lastLine = 0;
  private wake: (() => void) | undefined;
  private readonly rl: readline.Interface;
  private paused = false;

  constructor(private readonly input: NodeJS.ReadableStream, private readonly policy: ChunkPolicy) {
    this.rl = readline.createInterface({ input, crlfDelay: Infinity, terminal: false });
    this.rl.on('line', (line) => {
      this.pending.push(line);
      this.lastLine = performance.now();
      // hold the reader while translation is behind (a large file is not read into memory at once)
      if (this.pending.length >= 4 * this.policy.max && !this.paused) { this.paused = true; this.rl.pause(); }
      this.poke();
    });
    this.rl.on('close', () => { this.ended = true; this.poke(); });
    input.on('error', (e: Error) => { this.failure = e; this.ended = true; this.poke(); });
  }

  private poke(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private ready(): boolean {
    if (this.pending.length === 0) return false;
    return this.ended || this.pending.length >= this.policy.full || performance.now() - this.lastLine >= this.policy.idleMs;
  }

  /** The next chunk once one is ready; undefined after the last line. */
  async next(): Promise<string[] | undefined> {
    for (;;) {
      if (this.failure) throw this.failure;
      if (this.ready()) {
        const chunk = this.pending.splice(0, this.policy.max);
        if (this.paused && this.pending.length < 2 * this.policy.max) { this.paused = false; this.rl.resume(); }
        return chunk;
      }
      if (this.ended) return undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        const wait = this.pending.length ? Math.max(1, this.policy.idleMs - (performance.now() - this.lastLine)) : 0;
        const timer = wait ? setTimeout(() => this.poke(), wait) : undefined;
        const done = this.wake;
        this.wake = () => { if (timer) clearTimeout(timer); done(); };
      });
    }
  }

  /** Stops reading (the input is left to end on its own). */
  close(): void {
    this.rl.close();
    if (this.input !== process.stdin) (this.input as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
  }
}
