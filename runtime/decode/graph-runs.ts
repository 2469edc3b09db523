// A sequence of graph runs written once as a generator (it yields each run and gets its outputs back), driven on the
// event loop (runRunsSync: plan.runSync) or off it (runRuns: plan.run, the runtime's worker thread).
import type { Plan } from '../plan.ts';
import type { FeedTensor, ResidentTensor, RtTensor } from '../tensor.ts';

/** One run a sequence asks for. */
export interface GraphRun {
  graph: string;
  feeds: Record<string, FeedTensor>;
  into?: Record<string, ResidentTensor>;
}

/** A sequence of runs: yields each, receives its outputs, returns T. */
export type GraphRuns<T = void> = Generator<GraphRun, T, Record<string, RtTensor>>;

/** Runs the sequence with plan.runSync. */
export function runRunsSync<T>(plan: Plan, runs: GraphRuns<T>): T {
  let r = runs.next({});
  while (!r.done) r = runs.next(plan.runSync(r.value.graph, r.value.feeds, r.value.into));
  return r.value;
}

/** Runs the sequence with plan.run (nothing else may touch the plan's resident buffers meanwhile). */
export async function runRuns<T>(plan: Plan, runs: GraphRuns<T>): Promise<T> {
  let r = runs.next({});
  while (!r.done) r = runs.next(await plan.run(r.value.graph, r.value.feeds, r.value.into));
  return r.value;
}
