// Counted skips: tests that cannot run here go to uvu's own "Skipped:" total, and a final line says why, per reason.
import * as path from 'node:path';
import type { Callback, Test } from 'uvu';

const reasons = new Map<string, { count: number; files: Set<string> }>();

process.on('exit', () => {
  if (reasons.size === 0) return;
  const lines = [...reasons].map(([why, r]) => `    ${r.count} ${why} (${[...r.files].join(', ')})`);
  process.stdout.write(`  Skipped because:\n${lines.join('\n')}\n\n`);
});

/** The test file that called into this module (for the final line). */
function callerFile(): string {
  const lines = (new Error().stack ?? '').split('\n');
  const line = lines.find((l) => /\.test\.ts/.test(l)) ?? lines[3] ?? '';
  const m = /([^/\\(\s]+\.ts)/.exec(line.replace(/^.*?\/test\//, 'test/'));
  return m ? path.basename(m[1]) : '?';
}

function record(reason: string, n: number): void {
  const r = reasons.get(reason) ?? { count: 0, files: new Set<string>() };
  r.count += n;
  r.files.add(callerFile());
  reasons.set(reason, r);
}

/** Registers each of `names` as a skipped test of `suite` (counted in uvu's summary), for `reason`. */
export function skipSuite(suite: Test, reason: string, names: string[]): void {
  for (const name of names) suite.skip(name);
  record(reason, names.length);
}

/** `suite` itself when `reason` is falsy; else a registrar that skips (counted, for `reason`) every test given to it. */
export function testIf(suite: Test, reason: string | false | undefined): (name: string, fn: Callback) => void {
  if (!reason) return (name, fn) => suite(name, fn);
  return (name) => skipSuite(suite, reason, [name]);
}

/** The reason a test needs the native addon. */
export const NEEDS_NATIVE = 'need the native addon (npm run build:native)';

/** The reason a test needs a folder of ../shared (the fixtures beside the repository; PLANC_SHARED overrides). */
export const needsShared = (sub: string): string => `need ../shared/${sub} (or PLANC_SHARED)`;

/** Records that part of a running test was left out here (no uvu skip exists for half a test): listed in the final line. */
export function skipPart(reason: string, what: string): void {
  record(`${reason}: ${what} (part of a test)`, 1);
}
