// Row moves of a decoding batch (row i of the next step continues row from[i]) as byte spans for Plan.residentCopy.
import { PlancError } from '../../compiler/diagnostics.ts';
import type { Plan } from '../plan.ts';
import type { Resident } from '../tensor.ts';

/** Whether `from` keeps all `rows` rows where they are (row i ← i). */
export function keepsRows(from: readonly number[], rows: number): boolean {
  return from.length === rows && from.every((r, i) => r === i);
}

/**
 * Whether every row stays or moves down (from strictly increasing, from[i] ≥ i), as when finished rows leave the batch:
 * then copying row by row in order, inside one buffer, never overwrites a row before it is read.
 */
export function movesDown(from: readonly number[]): boolean {
  return from.every((r, i) => r >= i && (i === 0 || r > from[i - 1]!));
}

/** A PlancError unless `from` picks at most maxRows rows, each an integer in [0, rows). */
export function checkSelection(from: readonly number[], rows: number, maxRows: number): void {
  if (from.length > maxRows)
    throw new PlancError('PLANC_E405', `select: ${from.length} rows, but this batch was set up for at most ${maxRows}`);
  const bad = from.findIndex((r) => !Number.isInteger(r) || r < 0 || r >= rows);
  if (bad >= 0)
    throw new PlancError(
      'PLANC_E405',
      `select: row ${bad} continues row ${from[bad]}, which is not one of the ${rows} rows of the last step`,
    );
}

/** (src offset, dst offset, bytes) triples, at most `capacity` of them. */
export class Spans {
  private readonly words: Float64Array;
  private n = 0;

  constructor(capacity: number) {
    this.words = new Float64Array(3 * capacity);
  }

  push(src: number, dst: number, bytes: number): void {
    this.words[this.n++] = src;
    this.words[this.n++] = dst;
    this.words[this.n++] = bytes;
  }

  get count(): number {
    return this.n / 3;
  }

  /** The triples pushed so far. */
  get array(): Float64Array {
    return this.words.subarray(0, this.n);
  }
}

/**
 * Applies row-move spans: inside `buf` when rows only move down (movesDown), else from `buf` into `spare`. Returns the
 * buffers as [buf, spare] afterwards (swapped in the second case).
 */
export function moveRows(
  plan: Plan,
  buf: Resident,
  spare: Resident,
  spans: Spans,
  down: boolean,
): [Resident, Resident] {
  if (down) {
    plan.residentCopy(buf, buf, spans.array);
    return [buf, spare];
  }
  plan.residentCopy(buf, spare, spans.array);
  return [spare, buf];
}
