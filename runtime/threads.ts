// The kernel thread pool's default size: PLANC_NUM_THREADS, else the CPUs this process may use (affinity, cgroup quota).
import * as fs from 'node:fs';
import * as os from 'node:os';
import { PlancError } from '../compiler/diagnostics.ts';

/** The most threads setThreads accepts (native/src/addon.cc). */
export const MAX_THREADS = 1024;

/** CPUs a cgroup v2 quota allows (`/sys/fs/cgroup/cpu.max`: "QUOTA PERIOD", or "max PERIOD" for none), rounded up. */
export function cgroupCpuLimit(cpuMax = '/sys/fs/cgroup/cpu.max'): number | undefined {
  let text: string;
  try {
    text = fs.readFileSync(cpuMax, 'utf8');
  } catch {
    return undefined; // no cgroup v2 here
  }
  const [quota, period] = text.trim().split(/\s+/);
  const q = Number(quota),
    p = Number(period);
  if (quota === 'max' || !(q > 0) || !(p > 0)) return undefined;
  return Math.max(1, Math.ceil(q / p));
}

/** A thread count from text (PLANC_NUM_THREADS or --threads), or a PlancError naming where it came from. */
export function parseThreads(text: string, from: string): number {
  const n = Number(text);
  if (!/^\s*\d+\s*$/.test(text) || !Number.isInteger(n) || n < 1 || n > MAX_THREADS) {
    throw new PlancError('PLANC_E302', `${from} must be an integer in [1, ${MAX_THREADS}], got '${text}'`);
  }
  return n;
}

/**
 * The default pool size: PLANC_NUM_THREADS when set; else the CPUs of this process's affinity mask
 * (os.availableParallelism, sched_getaffinity on Linux), capped by the cgroup's CPU quota.
 */
export function defaultThreads(env: NodeJS.ProcessEnv = process.env): number {
  const given = env.PLANC_NUM_THREADS;
  if (given !== undefined && given.trim() !== '') return parseThreads(given, 'PLANC_NUM_THREADS');
  return Math.min(MAX_THREADS, availableCpus());
}

/** The CPUs this process may run on: its affinity mask (os.availableParallelism), capped by the cgroup's CPU quota. */
export function availableCpus(): number {
  const affinity = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return Math.max(1, Math.min(affinity, cgroupCpuLimit() ?? Infinity));
}

/**
 * The warning for more threads than CPUs (undefined when they fit): oversubscribed kernel threads wait on each other at
 * every parallel step, so a run gets slower, many times slower far over the CPUs. A warning, not an error: the count
 * may be meant (measuring, a machine about to get more CPUs).
 */
export function oversubscribed(threads: number, from: string, cpus = availableCpus()): string | undefined {
  if (threads <= cpus) return undefined;
  return `warning: ${from} ${threads} is more than the ${cpus} CPU${cpus === 1 ? '' : 's'} this process may use; the kernels' threads will wait on each other and run slower (up to many times slower), use ${from} ${cpus} or fewer`;
}
