// Progress on stderr for long commands: a line per step with its time, or a counted bar (redrawn in place on a terminal).
import type { ProgressBar, ProgressReporter } from '../passes/pass.ts';

export class Progress implements ProgressReporter {
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
    if (!this.quiet)
      process.stderr.write(process.stderr.isTTY ? `\r  ${this.step} (${s} s)\x1b[K\n` : `  ${this.step} (${s} s)\n`);
    this.step = '';
  }

  /** A counted step: `[####......] done/total` with its time, redrawn on a terminal, a line per 10% otherwise. */
  bar(label: string, total: number): ProgressBar {
    this.finish();
    const quiet = this.quiet;
    let done = 0,
      lastPct = -1;
    const t0 = performance.now();
    const draw = () => {
      const pct = total ? Math.floor((100 * done) / total) : 100;
      // a terminal redraws at each new percent; a log gets a line at each new tenth
      if (quiet || pct === lastPct || (!process.stderr.isTTY && Math.floor(pct / 10) === Math.floor(lastPct / 10)))
        return;
      lastPct = pct;
      const bar = '#'.repeat(Math.floor(pct / 5)).padEnd(20, '.');
      const s = ((performance.now() - t0) / 1000).toFixed(1);
      process.stderr.write(
        process.stderr.isTTY
          ? `\r  ${label} [${bar}] ${done}/${total} ${s} s\x1b[K`
          : `  ${label} [${bar}] ${done}/${total} ${s} s\n`,
      );
    };
    return {
      tick(n) {
        done += n;
        draw();
      },
      done() {
        done = total;
        draw();
        if (!quiet && process.stderr.isTTY) process.stderr.write('\n');
      },
    };
  }

  /** Seconds since the command started. */
  get elapsed(): number {
    return (performance.now() - this.t0) / 1000;
  }
}
