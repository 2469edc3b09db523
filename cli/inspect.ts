// `planc inspect MODEL [--json]`: graphs, I/O with symbolic shapes, opsets, op histogram, weights, unsupported ops.
import * as fs from 'node:fs';
import type { DecodingFacts, Graph, Model } from '../compiler/ir.ts';
import { readPlanFile } from '../compiler/plan/format.ts';
import type { PlanHeader } from '../compiler/plan/types.ts';
import { importModel, unsupportedOps } from '../model/onnx/import-model.ts';
import { typeStr } from '../model/printer.ts';
import { parseArgs, type CommandSpec } from './args.ts';
import { formatQuantizationReport, quantizationInspect } from './quantize.ts';
import { formatVocabReport, vocabInspect } from './vocab.ts';
import { fastInspect, formatFastReport } from './fast.ts';

export const INSPECT: CommandSpec = {
  name: 'inspect',
  args: 'MODEL|PLAN',
  summary:
    'Describes a model (MODEL: a .onnx file or a Hugging Face seq2seq folder): its graphs, inputs and outputs with symbolic shapes, opsets, operator histogram, weights and unsupported operators; or a plan (PLAN: a file planc optimize wrote): its target, profile, tokenizer, decoding conventions, arena and kernels per graph.',
  options: {
    json: { kind: 'boolean', help: 'print the report as JSON (stable field names, for scripts)' },
  },
};

export interface ModelReport {
  model: string;
  opsets: Record<string, number>;
  graphs: {
    name: string;
    file: string;
    inputs: { name: string; type: string }[];
    outputs: { name: string; type: string }[];
    nodes: number;
    ops: Record<string, number>;
    initializers: number;
  }[];
  parameters: number;
  storedParameters: number;
  uniqueWeightBytes: number;
  storedWeightBytes: number;
  weightsShared: number;
  unsupported: { op: string; nodes: string[] }[];
  decoding: Model['decoding'];
}

function histogram(g: Graph, into: Record<string, number> = {}): Record<string, number> {
  for (const n of g.nodes) {
    const k = n.domain ? `${n.domain}.${n.op}` : n.op;
    into[k] = (into[k] ?? 0) + 1;
    for (const a of Object.values(n.attrs)) if (a.kind === 'graph') histogram(a.value, into);
  }
  return into;
}

export function modelReport(path: string, model: Model): ModelReport {
  let parameters = 0;
  let uniqueWeightBytes = 0;
  for (const w of model.weights.values()) {
    parameters += w.tensor.size;
    uniqueWeightBytes += w.bytes;
  }
  let storedParameters = 0;
  const uses = new Map<string, number>();
  for (const g of model.graphs.values())
    for (const id of g.initializers.values()) {
      storedParameters += model.weights.get(id)!.tensor.size;
      uses.set(id, (uses.get(id) ?? 0) + 1);
    }
  const io = (g: Graph, names: string[]) => names.map((n) => ({ name: n, type: typeStr(g.values.get(n)?.type) }));
  return {
    model: path,
    opsets: model.opsets,
    graphs: [...model.graphs.values()].map((g) => ({
      name: g.name,
      file: model.sources[g.name] ?? '',
      inputs: io(g, g.inputs),
      outputs: io(g, g.outputs),
      nodes: g.nodes.length,
      ops: Object.fromEntries(Object.entries(histogram(g)).sort((a, b) => b[1] - a[1])),
      initializers: g.initializers.size,
    })),
    parameters,
    storedParameters,
    uniqueWeightBytes,
    storedWeightBytes: model.storedWeightBytes,
    weightsShared: [...uses.values()].filter((n) => n > 1).length,
    unsupported: [...unsupportedOps(model)].map(([op, nodes]) => ({ op, nodes })),
    decoding: model.decoding,
  };
}

const mb = (b: number) => `${(b / 1e6).toFixed(1)} MB`;

export function formatReport(r: ModelReport): string {
  const lines: string[] = [];
  lines.push(`model ${r.model}`);
  lines.push(
    `opsets: ${Object.entries(r.opsets)
      .map(([d, v]) => `${d || 'ai.onnx'} ${v}`)
      .join(', ')}`,
  );
  for (const g of r.graphs) {
    lines.push('', `graph ${g.name}  (${g.file}; ${g.nodes} nodes, ${g.initializers} initializers)`);
    for (const i of g.inputs) lines.push(`  in   ${i.name}: ${i.type}`);
    for (const o of g.outputs) lines.push(`  out  ${o.name}: ${o.type}`);
    lines.push(
      `  ops  ${Object.entries(g.ops)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
  }
  lines.push('');
  lines.push(
    `parameters: ${r.parameters.toLocaleString('en-US')} unique (${r.storedParameters.toLocaleString('en-US')} as stored)`,
  );
  lines.push(
    `weights: ${mb(r.uniqueWeightBytes)} unique, ${mb(r.storedWeightBytes)} as stored in the files (${r.weightsShared} tensors shared between graphs)`,
  );
  const facts = formatDecoding(r.decoding);
  if (facts) lines.push(`decoding: ${facts}`);
  if (r.unsupported.length) {
    lines.push(`unsupported operators (${r.unsupported.length}):`);
    for (const u of r.unsupported)
      lines.push(`  ${u.op}: ${u.nodes.length} node(s), e.g. ${u.nodes.slice(0, 3).join(', ')}`);
  } else lines.push('unsupported operators: none');
  return lines.join('\n');
}

/** What `planc inspect PLAN --json` reports. */
export interface PlanReport {
  plan: string;
  plancVersion: string;
  formatVersion: number;
  target: string;
  archs: string[];
  profile: PlanHeader['profile'];
  uniqueWeightBytes: number;
  weights: number;
  arenaBytes: number;
  graphs: {
    name: string;
    arenaBytes: number;
    arenaLowerBoundBytes: number;
    tensorBytesSum: number;
    kernelCount: number;
    kernels: Record<string, number>;
    /** Calls per `kernel variant` (cpu plans: the variant select-variants recorded, e.g. `fused_matmul auto`). */
    variants: Record<string, number>;
    fusedOps: Record<string, number>;
    inputs: string[];
    outputs: string[];
  }[];
  decoding: PlanHeader['decoding'];
  tokenizer: { kind: string; bytes: number };
  sourceHash: string;
  created: string;
  /** cuda plans: the nvcc that compiled the kernels, and ptxas -v of every entry point per arch (empty for cpu). */
  nvcc: string;
  kernels: {
    name: string;
    arch: string;
    registers: number;
    spillBytes: number;
    sharedBytes: number;
    stackBytes: number;
  }[];
  fatbinBytes: number;
  /** Plans made with --vocab: the method and the quality report (fractions in 0..1; BLEU null without a reference). */
  vocab?: ReturnType<typeof vocabInspect>;
  /** Plans made with --quantize: each product's precision and measured error, and the gate's measurements. */
  quantization?: ReturnType<typeof quantizationInspect>;
  /** Plans made with --fast: every combination measured (rung, vocabulary point, gate, time) and the choice. */
  fast?: ReturnType<typeof fastInspect>;
  /** Nodes computed at optimize time (their outputs are weights of the plan). */
  memoized: { graph: string; node: string; op: string; bytes: number; reused: boolean }[];
}

export function planReport(file: string, h: PlanHeader): PlanReport {
  return {
    plan: file,
    plancVersion: h.plancVersion,
    formatVersion: h.formatVersion,
    target: h.target.kind,
    archs: h.target.archs,
    profile: h.profile,
    uniqueWeightBytes: h.weights.reduce((a, w) => a + w.length, 0),
    weights: h.weights.length,
    arenaBytes: h.arena.bytes,
    graphs: h.programs.map((p) => {
      const kernels: Record<string, number> = {};
      const variants: Record<string, number> = {};
      for (const k of p.kernels) {
        kernels[k.name] = (kernels[k.name] ?? 0) + 1;
        if (k.variant) variants[`${k.name} ${k.variant}`] = (variants[`${k.name} ${k.variant}`] ?? 0) + 1;
      }
      return {
        name: p.graph,
        arenaBytes: p.arenaBytes,
        arenaLowerBoundBytes: p.arenaLowerBound,
        tensorBytesSum: p.tensorBytesSum,
        kernelCount: p.kernels.length,
        kernels: Object.fromEntries(Object.entries(kernels).sort((a, b) => b[1] - a[1])),
        variants: Object.fromEntries(Object.entries(variants).sort((a, b) => b[1] - a[1])),
        fusedOps: p.fusedOps ?? {},
        inputs: p.inputs.map((i) => i.name),
        outputs: p.outputs.map((o) => o.name),
      };
    }),
    decoding: h.decoding,
    tokenizer: { kind: h.tokenizerKind, bytes: h.tokenizer.length },
    sourceHash: h.sourceHash,
    created: h.created,
    nvcc: h.cuda?.nvccVersion ?? '',
    kernels: (h.cuda?.kernels ?? []).map((k) => ({
      name: k.name,
      arch: k.arch,
      registers: k.registers,
      spillBytes: k.spillBytes,
      sharedBytes: k.sharedBytes,
      stackBytes: k.stackBytes,
    })),
    fatbinBytes: h.cuda?.fatbin.length ?? 0,
    ...(h.vocab ? { vocab: vocabInspect(h.vocab) } : {}),
    ...(h.quantization ? { quantization: quantizationInspect(h.quantization) } : {}),
    ...(h.fast ? { fast: fastInspect(h.fast) } : {}),
    memoized: h.memoized ?? [],
  };
}

export function formatPlanReport(r: PlanReport, h?: PlanHeader): string {
  const lines = [
    // created is '' unless SOURCE_DATE_EPOCH was set (reproducible plans): then it is left out
    `plan ${r.plan} (planc ${r.plancVersion}, format ${r.formatVersion}${r.created ? `, created ${r.created}` : ''})`,
    `target: ${r.target}${r.archs.length ? ` ${r.archs.join(',')}` : ''}; profile: batch ≤ ${r.profile.maxBatch}, source ≤ ${r.profile.maxSrcLen}, target ≤ ${r.profile.maxTgtLen}`,
    `weights: ${r.weights} distinct tensors, ${mb(r.uniqueWeightBytes)}; arena ${mb(r.arenaBytes)} (shared by all graphs)`,
    r.tokenizer.kind
      ? `tokenizer: ${r.tokenizer.kind}, ${(r.tokenizer.bytes / 1e3).toFixed(1)} kB`
      : 'tokenizer: none (translate with --ids)',
    `decoding: ${formatDecoding(r.decoding) || 'no conventions recorded'}`,
  ];
  for (const g of r.graphs) {
    lines.push(
      `  ${g.name}: ${g.kernelCount} kernels, arena ${mb(g.arenaBytes)} (lower bound ${mb(g.arenaLowerBoundBytes)}, all tensors ${mb(g.tensorBytesSum)})`,
    );
    lines.push(
      `    ${Object.entries(g.kernels)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
    if (Object.keys(g.variants).length)
      lines.push(
        `    variants: ${Object.entries(g.variants)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
      );
    if (Object.keys(g.fusedOps).length)
      lines.push(
        `    fused: ${Object.entries(g.fusedOps)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
      );
  }
  if (h?.vocab) lines.push(...formatVocabReport(h.vocab));
  if (h?.quantization) lines.push(...formatQuantizationReport(h.quantization));
  if (h?.fast) lines.push(...formatFastReport(h.fast));
  if (r.memoized.length) {
    const bytes = r.memoized.reduce((a, m) => a + (m.reused ? 0 : m.bytes), 0);
    lines.push(
      `memoized at optimize time: ${r.memoized.length} node(s), ${mb(bytes)} of results (${r.memoized.filter((m) => m.reused).length} reused across graphs): ${[...new Set(r.memoized.map((m) => m.op))].join(', ')}`,
    );
  }
  if (r.kernels.length) {
    lines.push(
      `CUDA: ${new Set(r.kernels.map((k) => k.name)).size} kernels, fatbin ${mb(r.fatbinBytes)}, nvcc ${r.nvcc}; ptxas per arch (registers, spill bytes, shared bytes):`,
    );
    for (const k of r.kernels)
      lines.push(
        `  ${k.arch} ${k.name.padEnd(28)} ${String(k.registers).padStart(4)} regs ${String(k.spillBytes).padStart(5)} spill ${String(k.sharedBytes).padStart(6)} smem`,
      );
  }
  return lines.join('\n');
}

/** The decoding conventions as one line: `decoderStartId 2, eosIds [2], forcedBosId 977, badWords [[999]], ...`. */
function formatDecoding(d: DecodingFacts): string {
  const show = (v: unknown): string =>
    Array.isArray(v)
      ? `[${v.map((x) => show(typeof x === 'object' && x && 'ids' in x ? x.ids : x)).join(', ')}]`
      : typeof v === 'object' && v !== null
        ? `{${Object.entries(v)
            .map(([k, x]) => `${k} ${show(x)}`)
            .join(', ')}}`
        : String(v);
  const order = [
    'decoderStartId',
    'eosId',
    'eosIds',
    'padId',
    'bosId',
    'unkId',
    'vocabSize',
    'forcedBosId',
    'forcedEosId',
    'suppressTokens',
    'beginSuppressTokens',
    'badWords',
    'numBeams',
    'earlyStopping',
    'lengthPenalty',
    'numReturnSequences',
    'minLength',
    'minNewTokens',
    'noRepeatNgramSize',
    'encoderNoRepeatNgramSize',
    'repetitionPenalty',
    'doSample',
    'temperature',
    'topK',
    'topP',
    'maxNewTokens',
    'maxLength',
    'stepTokens',
  ];
  const rank = (k: string) => (order.includes(k) ? order.indexOf(k) : order.length);
  const single = d.eosIds?.length === 1 && d.eosIds[0] === d.eosId;
  return Object.entries(d)
    .filter(([k, v]) => v !== undefined && !(Array.isArray(v) && v.length === 0) && !(k === 'eosIds' && single))
    .sort(([a], [b]) => rank(a) - rank(b))
    .map(([k, v]) => `${k} ${show(v)}`)
    .join(', ');
}

function isPlanFile(file: string): boolean {
  if (!fs.existsSync(file) || fs.statSync(file).isDirectory()) return false;
  const fd = fs.openSync(file, 'r');
  try {
    const b = Buffer.alloc(8);
    fs.readSync(fd, b, 0, 8, 0);
    return b.toString('latin1') === 'PLANCPLN';
  } finally {
    fs.closeSync(fd);
  }
}

export function runInspect(argv: string[]): number {
  const { positional, flags } = parseArgs(INSPECT, argv);
  const target = positional[0]!;
  if (isPlanFile(target)) {
    const header = readPlanFile(target).header;
    const r = planReport(target, header);
    console.log(flags.json ? JSON.stringify(r, null, 2) : formatPlanReport(r, header));
    return 0;
  }
  const model = importModel(target, { allowUnsupported: true });
  const report = modelReport(target, model);
  console.log(flags.json ? JSON.stringify(report, null, 2) : formatReport(report));
  return 0;
}
