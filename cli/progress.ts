// Progress on stderr for long commands: one line per step with elapsed time (redrawn in place on a terminal).
export class Progress {
  private readonly t0 = performance.now();
  private step = '';
  private stepStart = this.t0;
  constructor(private readonly quiet = false) {}

  start(step: string): void {
    this.finish();
    this.step = step;
    this.stepStart = performance.now();
    if (!this.quiet && process.stderr.isTTY) process.stderr.write(`  ${step} ...`);
  }

  finish(): void {
    if (!this.step) return;
    const s = ((performance.now() - this.stepStart) / 1000).toFixed(2);
    if (!this.quiet) process.stderr.write(process.stderr.isTTY ? `\r  ${this.step} (${s} s)\x1b[K\n` : `  ${this.step} (${s} s)\n`);
    this.step = '';
  }

  /** Seconds since the command started. */
  get elapsed(): number { return (performance.now() - this.t0) / 1000; }
}
