// `planc run PLAN --graph G --inputs feeds.json|.npz`: runs one graph of a plan and prints output shapes and values.
import { PlancError } from '../compiler/diagnostics.ts';
import { loadPlan } from '../runtime/plan.ts';
import { toNumbers, type RtTensor } from '../runtime/tensor.ts';
import { parseArgs, type CommandSpec } from './args.ts';
import { readFeeds } from './feeds.ts';

export const RUN: CommandSpec = {
  name: 'run',
  usage: 'planc run PLAN --graph G --inputs FEEDS.json|FEEDS.npz [--json] [--full]',
  flags: { graph: 'string', inputs: 'string', json: 'boolean', full: 'boolean' },
};

function preview(t: RtTensor, full: boolean): string {
  const v = toNumbers(t);
  const shown = full ? v : v.slice(0, 8);
  const fmt = (x: number) => (Number.isInteger(x) ? String(x) : x.toPrecision(6));
  return `[${shown.map(fmt).join(', ')}${!full && v.length > 8 ? `, ... (${v.length} values)` : ''}]`;
}

export async function runRun(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(RUN, argv);
  const plan = await loadPlan(positional[0]!);
  try {
    const graph = (flags.graph as string | undefined) ?? (plan.graphs.length === 1 ? plan.graphs[0]! : undefined);
    if (!graph) throw new PlancError('PLANC_E301', `--graph is needed: the plan has ${plan.graphs.join(', ')}`);
    if (!flags.inputs) throw new PlancError('PLANC_E301', `--inputs FEEDS.json|.npz is needed; graph '${graph}' takes ${plan.inputs(graph).map((i) => `${i.name}: ${i.dtype}[${i.dims.join(',')}]`).join(', ')}`);
    const feeds = readFeeds(flags.inputs as string, plan.inputs(graph));
    const t0 = performance.now();
    const out = await plan.run(graph, feeds);
    const ms = performance.now() - t0;
    if (flags.json) {
      console.log(JSON.stringify(Object.fromEntries(Object.entries(out).map(([k, t]) => [k, { dtype: t.dtype, dims: t.dims, data: toNumbers(t) }]))));
    } else {
      for (const [k, t] of Object.entries(out)) console.log(`${k}: ${t.dtype}[${t.dims.join(',')}] ${preview(t, flags.full === true)}`);
      console.log(`(${ms.toFixed(2)} ms)`);
    }
  } finally {
    plan.close();
  }
  return 0;
}
