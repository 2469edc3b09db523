// The --threads option of the commands that run kernels on the CPU: sizes the native thread pool before any work.
import { setThreads } from '../runtime/native.ts';
import { MAX_THREADS, oversubscribed, parseThreads } from '../runtime/threads.ts';
import type { OptionSpec, Parsed } from './args.ts';

export const THREADS_OPTION: OptionSpec = {
  kind: 'string',
  value: 'N',
  help: `threads of the CPU kernels (1 to ${MAX_THREADS}; more than the CPUs this process may use is slower and warns); default: PLANC_NUM_THREADS when set, else the CPUs this process may run on (its affinity mask, e.g. taskset, capped by a cgroup CPU quota)`,
};

/** Applies --threads when given (the addon's default already honours PLANC_NUM_THREADS, affinity and cgroups). */
export function applyThreads(flags: Parsed['flags']): void {
  if (flags.threads === undefined) return;
  const n = parseThreads(String(flags.threads), '--threads');
  const warning = oversubscribed(n, '--threads');
  if (warning) process.stderr.write(`planc: ${warning}\n`);
  setThreads(n);
}
