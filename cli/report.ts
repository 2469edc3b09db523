// `planc report PLAN [-o report.html] [--json]`: the plan's report (pages/report.ts): its graphs profiled on this
// machine at one row and the profile's most rows, its tuning decisions, precision, vocabulary rewrite, arena, conventions.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PlancError } from '../compiler/diagnostics.ts';
import { readPlanFile } from '../compiler/plan/format.ts';
import { TENSOR_KIND, type PlanFile, type PlanProgram } from '../compiler/plan/types.ts';
import { thisDevice } from '../optimize/tune-device.ts';
import { measurePlan, tuningPoints } from '../optimize/tune-measure.ts';
import { renderReport, type GraphTiming, type ReportData } from '../pages/report.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { parseArgs, type CommandSpec } from './args.ts';
import { checkInputFile, checkOutputFile } from './files.ts';
import { applyThreads, THREADS_OPTION } from './threads.ts';

export const REPORT: CommandSpec = {
  name: 'report',
  args: 'PLAN',
  summary:
    "Writes a plan's report: one self-contained HTML page (no network) with where the time goes per graph and per op (profiled here, at batch 1 and the profile's most rows), every tuning decision with its alternatives' times and why, precision per layer with its measured error, the vocabulary rewrite's quality, the memory arena over each program, the machine and the plan's conventions.",
  options: {
    output: {
      kind: 'string',
      short: 'o',
      value: 'FILE',
      help: 'the HTML file to write (default: PLAN with .report.html)',
    },
    json: { kind: 'boolean', help: 'print the same data as JSON on standard output instead of writing the page' },
    'no-profile': {
      kind: 'boolean',
      help: 'do not run the plan (no timings; the rest of the report is read from the plan)',
    },
    runs: {
      kind: 'number',
      value: 'N',
      help: 'timed runs per graph and point, after a warm-up run (default 5; the median counts)',
    },
    threads: THREADS_OPTION,
  },
};

/** Arena bytes live at each kernel call: an arena tensor from the call that first writes it to the last that reads it. */
export function liveBytes(p: PlanProgram): number[] {
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  p.kernels.forEach((k, i) => {
    for (const t of [...k.inputs, ...k.outputs]) {
      if (t < 0 || p.tensors[t]?.kind !== TENSOR_KIND.ARENA) continue;
      if (!first.has(t)) first.set(t, i);
      last.set(t, i);
    }
  });
  for (const o of p.outputs) if (first.has(o.tensor)) last.set(o.tensor, p.kernels.length - 1);
  const live = new Array<number>(p.kernels.length).fill(0);
  for (const [t, a] of first) for (let i = a; i <= last.get(t)!; i++) live[i]! += p.tensors[t]!.slotBytes;
  return live;
}

/** The report's data for a plan; with `runs`, its graphs are profiled on this machine. */
export function reportData(file: PlanFile, name: string, runs?: number): ReportData {
  const h = file.header;
  const points = tuningPoints(file);
  const timings = runs
    ? measurePlan(
        file,
        h.programs.map((p) => p.graph),
        points,
        { warmup: 1, runs },
      )
    : undefined;
  const device = runs ? thisDevice() : undefined;
  return {
    plan: name,
    plancVersion: h.plancVersion,
    target: h.target.kind + (h.target.archs.length ? ` ${h.target.archs.join(',')}` : ''),
    created: h.created,
    profile: { maxBatch: h.profile.maxBatch, maxSrcLen: h.profile.maxSrcLen, maxTgtLen: h.profile.maxTgtLen },
    weights: { tensors: h.weights.length, bytes: h.blobBytes },
    ...(device
      ? {
          machine: {
            cpu: device.cpu,
            cores: device.cores,
            threads: device.threads,
            blas: device.blas,
            simd: device.simd,
            flags: device.flags.join(' '),
            device: device.id,
          },
        }
      : {}),
    ...(h.options.tuned ? { tunedOn: h.options.tuned } : {}),
    graphs: h.programs.map((p, gi) => ({
      graph: p.graph,
      kernels: p.kernels.length,
      arenaBytes: p.arenaBytes,
      arenaLowerBound: p.arenaLowerBound,
      tensorBytesSum: p.tensorBytesSum,
      live: liveBytes(p),
      timing: (timings ?? []).map((perGraph, pi): GraphTiming => {
        const t = perGraph[gi]!;
        const byOp = new Map<string, number>();
        p.kernels.forEach((k, i) => byOp.set(k.name, (byOp.get(k.name) ?? 0) + t.calls[i]!.micros / 1000));
        return {
          point: `batch ${points[pi]!.batch}, source ${points[pi]!.srcLen}, past ${points[pi]!.past}`,
          runMs: t.run.micros / 1000,
          byOp: [...byOp].map(([op, ms]) => ({ op, ms })).sort((a, b) => b.ms - a.ms),
          top: p.kernels
            .map((k, i) => ({
              call: i,
              kernel: k.name,
              node: k.node,
              variant: k.variant ?? '',
              ms: t.calls[i]!.micros / 1000,
            }))
            .sort((a, b) => b.ms - a.ms)
            .slice(0, 12),
        };
      }),
    })),
    decisions: h.tuning.map((r) => {
      const [graph = '', call = '', kernel = ''] = r.key.split(':');
      return {
        key: r.key,
        graph,
        call: call === 'confirm' ? null : Number(call),
        kernel: call === 'confirm' ? '' : kernel,
        choice: r.choice,
        micros: r.micros,
        reason: r.reason ?? '',
        alternatives: r.alternatives ?? [],
      };
    }),
    ...(h.quantization
      ? {
          quantization: {
            mode: h.quantization.mode,
            gate: h.quantization.gate,
            gatePassed: h.quantization.gatePassed,
            top1Agreement: h.quantization.top1Agreement,
            identicalSentences: h.quantization.identicalSentences,
            evalSentences: h.quantization.evalSentences,
            weightBytes: h.quantization.weightBytes,
            weightBytesFp32: h.quantization.weightBytesFp32,
            layers: h.quantization.layers.map((l) => ({
              graph: l.graph,
              node: l.node,
              op: l.op,
              precision: l.precision,
              error: l.error,
              reason: l.reason,
            })),
          },
        }
      : {}),
    ...(h.vocab ? { vocab: vocabFacts(h.vocab) } : {}),
    ...(h.vocab?.curve.length
      ? {
          vocabCurve: h.vocab.curve.map((p) => ({
            ...p,
            chosen: p.clusters === h.vocab!.clusters && p.topK === h.vocab!.topK,
          })),
        }
      : {}),
    ...(h.fast ? { fast: h.fast } : {}),
    conventions: { ...h.decoding, tokenizer: h.tokenizerKind || 'none' },
  };
}

/** The vocabulary rewrite's facts, without its big arrays (the shortlist itself). */
function vocabFacts(v: NonNullable<PlanFile['header']['vocab']>): Record<string, string | number | boolean> {
  return Object.fromEntries(
    Object.entries(v).filter(([, x]) => !Array.isArray(x) && x !== '' && typeof x !== 'object'),
  ) as Record<string, string | number | boolean>;
}

export async function runReport(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(REPORT, argv);
  const planFile = positional[0]!;
  checkInputFile(planFile, 'PLAN');
  const runs = flags.runs === undefined ? 5 : flags.runs;
  if (typeof runs !== 'number' || !Number.isInteger(runs) || runs < 1)
    throw new PlancError('PLANC_E301', `--runs must be a positive integer, got ${flags.runs}`);
  if (flags.json === true && flags.output !== undefined)
    throw new PlancError('PLANC_E301', '--json prints the data; -o writes the page: give one');
  applyThreads(flags);
  const file = readPlanFile(planFile);
  const profile = flags['no-profile'] !== true && file.header.target.kind === 'cpu' && nativeAvailable();
  const data = reportData(file, path.basename(planFile), profile ? runs : undefined);
  if (flags.json === true) {
    process.stdout.write(`${JSON.stringify(data, null, 1)}\n`);
    return 0;
  }
  const out = (flags.output as string | undefined) ?? planFile.replace(/(\.plan)?$/, '.report.html');
  checkOutputFile(out, '-o');
  fs.writeFileSync(out, renderReport(data));
  console.log(
    `report ${out}: ${data.graphs.length} graphs${profile ? ' profiled' : ''}, ${data.decisions.length} tuning decisions${data.quantization ? `, ${data.quantization.layers.length} quantized layers` : ''}`,
  );
  return 0;
}
