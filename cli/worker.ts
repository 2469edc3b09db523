// `planc worker PLAN [PLAN...] --redis URL`: takes translation jobs from the queue (serve/queue/worker.ts) until SIGTERM
// or SIGINT, then finishes the jobs it holds and exits 0.
import { PlancError } from '../compiler/diagnostics.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { DEFAULT_QUEUE } from '../serve/queue/jobs.ts';
import { startWorker } from '../serve/queue/worker.ts';
import { intOption, parseArgs, type CommandSpec } from './args.ts';
import { drainOnSignal } from './stop-signal.ts';
import { applyThreads, THREADS_OPTION } from './threads.ts';

export const WORKER: CommandSpec = {
  name: 'worker',
  args: 'PLAN [PLAN...]',
  positional: [1, 64],
  summary:
    "Translates jobs from a BullMQ queue on Redis (planc submit adds them): each plan takes the jobs of its model (named by the plan's file name without .plan), and the sentences of the jobs it holds share the plan's decoding loop, as planc serve's requests do. A worker killed mid-job leaves the job to another after --lock-ms; a job with bad options fails once with its PLANC code. SIGTERM or SIGINT stops taking jobs, finishes those it holds and exits 0. Run one per machine (or per core group) against one Redis.",
  options: {
    redis: {
      kind: 'string',
      value: 'URL',
      help: 'the Redis server: redis://[user:password@]host:port[/db] (rediss:// for TLS); required',
    },
    queue: { kind: 'string', value: 'NAME', help: `queue prefix shared with planc submit (default ${DEFAULT_QUEUE})` },
    concurrency: {
      kind: 'number',
      value: 'N',
      help: 'jobs held at once per model; their sentences decode together (default 8)',
    },
    'lock-ms': {
      kind: 'number',
      value: 'N',
      help: "job lock time: a killed worker's job is taken up by another after about this long (default 10000)",
    },
    'max-rows': {
      kind: 'number',
      value: 'N',
      help: "rows (sentences × beams) of one decoder step per model (default and cap: the plan's --max-batch)",
    },
    threads: THREADS_OPTION,
  },
  notes: `Example (two machines and one Redis):
  planc worker es-en.plan --redis redis://:PASSWORD@queue-host:6379     (on each machine)
  planc submit --redis redis://:PASSWORD@queue-host:6379 -i big.es -o big.en`,
};

export async function runWorker(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(WORKER, argv);
  if (flags.redis === undefined) throw new PlancError('PLANC_E301', '--redis URL is required (redis://host:port)');
  applyThreads(flags);
  const plans: Plan[] = [];
  try {
    for (const p of positional) plans.push(await loadPlan(p));
    const worker = await startWorker(plans, {
      redis: String(flags.redis),
      queue: flags.queue === undefined ? DEFAULT_QUEUE : String(flags.queue),
      concurrency: intOption(flags, 'concurrency', 1, 1024) ?? 8,
      lockMs: intOption(flags, 'lock-ms', 1000, 3_600_000) ?? 10_000,
      scheduler: { maxRows: intOption(flags, 'max-rows', 1, 1 << 16) },
      log: (line) => console.error(line),
    });
    await drainOnSignal('worker', 'finishing the jobs held', () => worker.close());
    return 0;
  } finally {
    for (const p of plans) p.close();
  }
}
