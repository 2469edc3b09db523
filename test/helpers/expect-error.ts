// One assertion for expected failures: the call throws a PlancError with this code whose message matches.
import * as assert from 'uvu/assert';
import { PlancError } from '../../compiler/diagnostics.ts';

export function failsWith(fn: () => unknown, code: string, want: string | RegExp): void {
  try {
    fn();
  } catch (e) {
    assert.instance(e, PlancError, `expected a PlancError, got ${(e as Error).stack}`);
    const m = (e as PlancError).message;
    assert.is((e as PlancError).code, code, m);
    assert.ok(typeof want === 'string' ? m.includes(want) : want.test(m), `message does not match ${want}: ${m}`);
    return;
  }
  assert.unreachable(`expected a ${code} failure matching ${want}`);
}

/** The message a call throws ('' when it returns). */
export function thrown(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  return '';
}

/** The message a promise rejects with ('' when it resolves). */
export async function rejected(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return (e as Error).message;
  }
  return '';
}
