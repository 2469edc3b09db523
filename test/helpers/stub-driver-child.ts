// Child process of test/cuda-runtime.test.ts: loads a cuda plan on the fake libcuda (test/native/cuda-stub.c), runs
// each graph once on random feeds, prints JSON: the device name, the launches expected per graph, and any error.
import { loadPlan } from '../../runtime/plan.ts';
import { cloneFeeds, randomFeeds } from './random-feeds.ts';

const [file, only] = process.argv.slice(2);
const plan = await loadPlan(file!);
const result: { device: string; runs: { graph: string; calls: string[]; outputs: Record<string, number[]> }[]; error?: string } = {
  device: plan.device, runs: [],
};
try {
  for (const graph of plan.graphs) {
    if (only && graph !== only) continue;
    const feeds = randomFeeds(plan, graph, { batch: 3, srcLen: 7, past: 2, vocab: plan.header.decoding.vocabSize ?? 100, seed: 5 });
    const out = plan.runSync(graph, cloneFeeds(feeds));
    const p = plan.header.programs.find((x) => x.graph === graph)!;
    const calls = plan.header.cuda!.programs[plan.header.programs.indexOf(p)]!.calls.map((c) => c.variants.map((v) => v.entry).join('|'));
    result.runs.push({ graph, calls, outputs: Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.dims])) });
  }
} catch (e) {
  result.error = (e as Error).message;
}
plan.close();
console.log(JSON.stringify(result));
