// Lines of a stream in chunks for translation: a chunk is ready when full, when the input pauses, or at the end.
export interface ChunkPolicy {
  /** A chunk is ready once this many lines wait. */
  full: number;
  /** The most lines in one chunk. */
  max: number;
  /** Lines that waited this long without a new line arriving are ready too (an interactive pipe gets each answer). */
  idleMs: number;
}

/** A line whose bytes are not UTF-8: it fails alone (its text is the lossy decoding, for nothing but messages). */
export class InvalidLine {
  constructor(readonly bytes: number) {}
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads lines (`\n` or `\r\n`; a last line without a newline counts) and hands them out in chunks, in order. Lines are
 * split on the raw bytes and decoded one by one, so a line that is not valid UTF-8 comes out as an InvalidLine (the
 * others are unaffected) instead of text with replacement characters.
 */
export class LineChunks {
  private readonly pending: (string | InvalidLine)[] = [];
  private ended = false;
  private failure: Error | undefined;
  private lastLine = 0;
  private wake: (() => void) | undefined;
  private paused = false;
  private closed = false;
  /** Bytes of the line being read (before its newline arrives). */
  private carry: Buffer[] = [];
  private readonly onData = (data: Buffer | string) => {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let from = 0;
    for (let nl = buf.indexOf(0x0a, from); nl >= 0; nl = buf.indexOf(0x0a, from)) {
      this.carry.push(buf.subarray(from, nl));
      this.line();
      from = nl + 1;
    }
    if (from < buf.length) this.carry.push(buf.subarray(from));
    // hold the reader while translation is behind (a large file is not read into memory at once)
    if (this.pending.length >= 4 * this.policy.max && !this.paused) {
      this.paused = true;
      this.input.pause();
    }
    this.poke();
  };
  private readonly onEnd = () => {
    if (this.carry.some((b) => b.length > 0)) this.line();
    this.ended = true;
    this.poke();
  };
  private readonly onError = (e: Error) => {
    this.failure = e;
    this.ended = true;
    this.poke();
  };

  constructor(
    private readonly input: NodeJS.ReadableStream,
    private readonly policy: ChunkPolicy,
  ) {
    input.on('data', this.onData);
    input.on('end', this.onEnd);
    input.on('error', this.onError);
  }

  /** The carried bytes as one line (a final \r dropped), decoded. */
  private line(): void {
    let bytes = this.carry.length === 1 ? this.carry[0]! : Buffer.concat(this.carry);
    this.carry = [];
    if (bytes.length > 0 && bytes[bytes.length - 1] === 0x0d) bytes = bytes.subarray(0, bytes.length - 1);
    let line: string | InvalidLine;
    try {
      line = utf8.decode(bytes);
    } catch {
      line = new InvalidLine(bytes.length);
    }
    this.pending.push(line);
    this.lastLine = performance.now();
  }

  private poke(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private ready(): boolean {
    if (this.pending.length === 0) return false;
    return (
      this.ended || this.pending.length >= this.policy.full || performance.now() - this.lastLine >= this.policy.idleMs
    );
  }

  /** The next chunk once one is ready; undefined after the last line. */
  async next(): Promise<(string | InvalidLine)[] | undefined> {
    for (;;) {
      if (this.failure) throw this.failure;
      if (this.ready()) {
        const chunk = this.pending.splice(0, this.policy.max);
        if (this.paused && !this.closed && this.pending.length < 2 * this.policy.max) {
          this.paused = false;
          this.input.resume();
        }
        return chunk;
      }
      if (this.ended) return undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        const wait = this.pending.length ? Math.max(1, this.policy.idleMs - (performance.now() - this.lastLine)) : 0;
        const timer = wait ? setTimeout(() => this.poke(), wait) : undefined;
        const done = this.wake;
        this.wake = () => {
          if (timer) clearTimeout(timer);
          done();
        };
      });
    }
  }

  /** Stops reading (the input is left to end on its own). */
  close(): void {
    this.closed = true;
    this.input.off('data', this.onData);
    this.input.off('end', this.onEnd);
    this.input.off('error', this.onError);
    this.input.pause();
    if (this.input !== process.stdin) (this.input as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
  }
}
