// `planc run PLAN --graph G -i feeds.json|.npz [-o FILE]`: runs one graph of a plan and prints output shapes and values.
import * as fs from 'node:fs';
import { PlancError } from '../compiler/diagnostics.ts';
import { loadPlan } from '../runtime/plan.ts';
import { toNumbers, type RtTensor } from '../runtime/tensor.ts';
import { parseArgs, type CommandSpec } from './args.ts';
import { readFeeds } from './feeds.ts';
import { checkOutputFile } from './files.ts';
import { applyThreads, THREADS_OPTION } from './threads.ts';
import { applyDevice } from '../runtime/backends/cudasim.ts';

export const RUN: CommandSpec = {
  name: 'run',
  args: 'PLAN',
  summary:
    'Runs one graph of a plan on feeds read from a file and prints each output: its dtype, dims and first values (or all of them as JSON), then the time of the run.',
  options: {
    graph: {
      kind: 'string',
      value: 'G',
      help: 'the graph to run (encoder, decoder, decoder_with_past, ...); may be left out when the plan has one graph',
    },
    inputs: {
      kind: 'string',
      short: 'i',
      value: 'FILE',
      help: 'the feeds: a .json file ({"name": nested arrays} or {"name": {"dtype", "dims", "data"}}) or a NumPy .npz file; plain arrays take the dtype the plan wants',
    },
    output: { kind: 'string', short: 'o', value: 'FILE', help: 'write the outputs to FILE instead of standard output' },
    json: { kind: 'boolean', help: 'print the outputs as JSON: {"name": {"dtype", "dims", "data"}}' },
    full: { kind: 'boolean', help: 'print every value, not the first 8' },
    threads: THREADS_OPTION,
    device: {
      kind: 'string',
      value: 'sim',
      help: 'sim: run a cuda plan on the emulated CUDA device (native/cudasim, on the CPU: slow, for checking kernels; as PLANC_DEVICE=sim)',
    },
  },
};

function preview(t: RtTensor, full: boolean): string {
  const v = toNumbers(t);
  const shown = full ? v : v.slice(0, 8);
  const fmt = (x: number) => (Number.isInteger(x) ? String(x) : x.toPrecision(6));
  return `[${shown.map(fmt).join(', ')}${!full && v.length > 8 ? `, ... (${v.length} values)` : ''}]`;
}

export async function runRun(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(RUN, argv);
  const output = flags.output as string | undefined;
  if (output !== undefined) checkOutputFile(output, '--output');
  applyThreads(flags);
  applyDevice(flags.device as string | undefined);
  const plan = await loadPlan(positional[0]!);
  try {
    const graph = (flags.graph as string | undefined) ?? (plan.graphs.length === 1 ? plan.graphs[0]! : undefined);
    if (!graph) throw new PlancError('PLANC_E301', `--graph is needed: the plan has ${plan.graphs.join(', ')}`);
    if (!flags.inputs)
      throw new PlancError(
        'PLANC_E301',
        `--inputs FEEDS.json|.npz is needed; graph '${graph}' takes ${plan
          .inputs(graph)
          .map((i) => `${i.name}: ${i.dtype}[${i.dims.join(',')}]`)
          .join(', ')}`,
      );
    const feeds = readFeeds(flags.inputs as string, plan.inputs(graph));
    const t0 = performance.now();
    const out = await plan.run(graph, feeds);
    const ms = performance.now() - t0;
    if (Object.keys(out).length === 0)
      throw new PlancError('PLANC_E401', `graph '${graph}' gave no outputs`, { file: positional[0]! });
    const lines = flags.json
      ? [
          JSON.stringify(
            Object.fromEntries(
              Object.entries(out).map(([k, t]) => [k, { dtype: t.dtype, dims: t.dims, data: toNumbers(t) }]),
            ),
          ),
        ]
      : [
          ...Object.entries(out).map(
            ([k, t]) => `${k}: ${t.dtype}[${t.dims.join(',')}] ${preview(t, flags.full === true)}`,
          ),
          `(${ms.toFixed(2)} ms)`,
        ];
    if (output !== undefined) fs.writeFileSync(output, `${lines.join('\n')}\n`);
    else console.log(lines.join('\n'));
  } finally {
    plan.close();
  }
  return 0;
}
