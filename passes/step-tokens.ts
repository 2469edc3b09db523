// --step-tokens N > 1: the decoder step's input_ids token axis becomes the symbol step_tokens (≤ N); exports that fix
// the step at one token are refused. kv-cache-in-place then makes the cached self-attention causal among the new tokens.
import { POSITION_IDS_INPUT, STEP_INPUT, STEP_TOKENS_SYMBOL } from '../compiler/plan/io-names.ts';
import { Diagnostics, PlancError } from '../compiler/diagnostics.ts';
import { inferGraph, type Facts } from '../model/infer/infer.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { dimAdd, dimEq, dimStr, dimSub, dimSymbols, isSym, shapeStr, sym, type Dim } from '../compiler/symbolic.ts';
import { copyModel, type Pass, type PassContext } from './pass.ts';

const NAME = 'step-tokens';

/** The passes a step of several tokens relies on: its self-attention must become planc.Attention over an in-place cache. */
const NEEDED = ['fuse-attention', 'kv-cache-in-place'];

/**
 * The step tokens a plan gets when none are asked for: cpu plans take up to 8 new tokens a step (the multi-token step
 * costs greedy nothing measurable at one token there, `npm run bench -- lookup`, bench/results/lookup.jsonl, and lets
 * the drafted and Jacobi strategies run on a default plan); cuda plans keep one until their multi-token attention has
 * run on hardware. Undefined (one token) where the passes it relies on are disabled.
 */
export function defaultStepTokens(target: 'cpu' | 'cuda', disable: readonly string[] = []): number | undefined {
  return target === 'cpu' && neededOff(disable) === undefined ? DEFAULT_STEP_TOKENS : undefined;
}
const DEFAULT_STEP_TOKENS = 8;

/** The disabled pass ('fuse': every fusion) that a step of several tokens relies on, if any. */
function neededOff(disable: readonly string[]): string | undefined {
  return disable.find((d) => d === 'fuse' || NEEDED.includes(d));
}

/** N of a pass context: 1 unless set; PLANC_E302 unless an integer ≥ 1. */
export function stepTokensOf(ctx: PassContext): number {
  const n = ctx.stepTokens ?? 1;
  if (!Number.isInteger(n) || n < 1)
    throw new PlancError(
      'PLANC_E302',
      (opt) => `${opt('stepTokens')} must be an integer ≥ 1 (the most new tokens one decoder step takes), got ${n}`,
    );
  return n;
}

/** Fails (PLANC_E302) on a bad N, or on N > 1 with a pass it relies on disabled (`disable` as in runPipeline). */
export function checkStepTokens(opts: PassContext & { disable?: string[] }): void {
  const n = stepTokensOf(opts);
  const off = neededOff(opts.disable ?? []);
  if (n === 1 || off === undefined) return;
  throw new PlancError(
    'PLANC_E302',
    (opt) =>
      `${opt('stepTokens')} ${n} needs ${NEEDED.join(' and ')}: the decoder step's self-attention must become planc.Attention over the in-place cache to be made causal among the new tokens, and ${off === 'fuse' ? opt('fuse') : `disabling ${off}`} leaves it unfused`,
  );
}

/** A past self-attention K/V input of a decoder step (optimum's names: past_key_values.L.decoder.key|value). */
export function isPastSelfInput(name: string): boolean {
  return /^past_key_values\.\d+\.decoder\./.test(name);
}

/** Whether a graph is a decoder step over past K/V (decoder_with_past). */
export function isStepGraph(g: Graph): boolean {
  return g.inputs.some(isPastSelfInput);
}

const mentionsStep = (shape: Dim[] | undefined) => !!shape?.some((d) => dimSymbols(d).includes(STEP_TOKENS_SYMBOL));

function inferStep(model: Model, g: Graph, n: number): Facts {
  const diags = new Diagnostics();
  const facts = inferGraph(model, g, { annotate: false }, diags);
  const e = diags.errors[0];
  if (e)
    throw new PlancError(
      'PLANC_E404',
      (opt) => `${opt('stepTokens')} ${n}: the decoder step does not infer with several new tokens: ${e.message}`,
      { ...e.where, stage: NAME },
    );
  return facts;
}

/** The first node feeding `output` that reads a value shaped by the new tokens and makes none (the step's fixed length). */
function culprit(g: Graph, facts: Facts, output: string): Node | undefined {
  const producer = new Map(g.nodes.flatMap((n, i) => n.outputs.map((o) => [o, i] as const)));
  const feeding = new Set<number>();
  const stack = [output];
  while (stack.length) {
    const i = producer.get(stack.pop()!);
    if (i === undefined || feeding.has(i)) continue;
    feeding.add(i);
    stack.push(...g.nodes[i]!.inputs.filter((x) => x));
  }
  const first = [...feeding]
    .sort((a, b) => a - b)
    .find((i) => {
      const n = g.nodes[i]!;
      return (
        n.op !== 'Shape' &&
        n.inputs.some((x) => x && mentionsStep(facts.get(x)?.shape)) &&
        !n.outputs.some((o) => o && mentionsStep(facts.get(o)?.shape))
      );
    });
  return first === undefined ? g.nodes[producer.get(output) ?? -1] : g.nodes[first];
}

/**
 * Windows an export takes at the past length with a fixed extent (positions past..past+1 sliced or ranged, one row
 * gathered at the past length): with n new tokens they would give every token the first one's position.
 */
function fixedWindow(node: Node, facts: Facts, past: Set<string>): string | undefined {
  const vals = (x: string | undefined) => (x ? facts.get(x)?.sym : undefined);
  const atPast = (d: Dim) => dimSymbols(d).some((s) => past.has(s));
  const bounds: [string | undefined, string | undefined] | undefined =
    node.domain !== ''
      ? undefined
      : node.op === 'Slice'
        ? [node.inputs[1], node.inputs[2]]
        : node.op === 'Range'
          ? [node.inputs[0], node.inputs[1]]
          : undefined;
  if (bounds) {
    const [s, e] = [vals(bounds[0]), vals(bounds[1])];
    for (let k = 0; s && e && k < Math.min(s.length, e.length); k++) {
      const extent = dimSub(e[k]!, s[k]!);
      if (typeof extent === 'number' && extent !== 0 && (atPast(s[k]!) || atPast(e[k]!)))
        return `takes the window ${dimStr(s[k]!)}..${dimStr(e[k]!)} of fixed extent ${extent} at the past length`;
    }
  }
  if (node.domain === '' && node.op === 'Gather') {
    const idx = facts.get(node.inputs[1] ?? '');
    if (idx?.sym?.some(atPast) && !mentionsStep(idx.shape))
      return `gathers ${shapeStr(idx.shape)} index ${idx.sym.map(dimStr).join(',')} at the past length, one row for all new tokens`;
  }
  return undefined;
}

/** Makes input_ids' token axis the step symbol, then checks the step's outputs and position windows follow it. */
function relaxGraph(model: Model, g: Graph, n: number): void {
  const where = (node?: Node) => ({ graph: g.name, stage: NAME, ...(node ? { node: node.name, op: node.op } : {}) });
  const ids = g.values.get(STEP_INPUT)?.type;
  if (!g.inputs.includes(STEP_INPUT) || ids?.shape?.length !== 2) {
    throw new PlancError(
      'PLANC_E404',
      (opt) =>
        `${opt('stepTokens')} ${n}: the decoder step has no ${STEP_INPUT} input [batch, new tokens] to take ${n} tokens`,
      where(),
    );
  }
  const before = inferStep(model, g, n);
  const old = ids.shape[1]!;
  const step = sym(STEP_TOKENS_SYMBOL);
  for (const name of g.inputs) {
    const v = g.values.get(name)!;
    if (!v.type?.shape) continue;
    // the token axis of input_ids and of an HRT model's position_ids (one position per new token)
    const shape = v.type.shape.map((d, axis) =>
      ((name === STEP_INPUT || name === POSITION_IDS_INPUT) && axis === 1) || (isSym(old) && dimEq(d, old)) ? step : d,
    );
    g.values.set(name, { ...v, type: { ...v.type, shape } });
  }
  const after = inferStep(model, g, n);
  const fixed = (o: string, got: Dim[], want: string): never => {
    const at = culprit(g, after, o);
    throw new PlancError(
      'PLANC_E404',
      (opt) =>
        `${opt('stepTokens')} ${n}: with ${STEP_TOKENS_SYMBOL} new tokens output '${o}' is ${shapeStr(got)}, not ${want}: the export fixes the step at one token${at ? ` (from node '${at.name}' on)` : ''}`,
      where(at),
    );
  };
  for (const o of g.outputs) {
    const [pre, post] = [before.get(o)?.shape, after.get(o)?.shape];
    if (!pre || !post) continue;
    const past = `past_key_values.${o.slice('present.'.length)}`;
    if (o.startsWith('present.') && isPastSelfInput(past)) {
      const rows = dimAdd(g.values.get(past)?.type?.shape?.[2] ?? 0, step);
      if (post.length !== 4 || !dimEq(post[2]!, rows)) fixed(o, post, `${dimStr(rows)} rows`);
    } else if (pre.length >= 2 && dimEq(pre[1]!, old) && !dimEq(post[1]!, step)) {
      fixed(o, post, `${STEP_TOKENS_SYMBOL} at axis 1`);
    }
  }
  const past = new Set(
    g.inputs.filter(isPastSelfInput).flatMap((i) => dimSymbols(g.values.get(i)?.type?.shape?.[2] ?? 0)),
  );
  for (const node of g.nodes) {
    const why = fixedWindow(node, after, past);
    if (why)
      throw new PlancError(
        'PLANC_E404',
        (opt) => `${opt('stepTokens')} ${n}: node '${node.name}' ${why}: the export fixes the step at one token`,
        where(node),
      );
  }
}

export const STEP_TOKENS: Pass = {
  name: NAME,
  summary: `input_ids [batch, 1] of a decoder step  ⇒  [batch, ${STEP_TOKENS_SYMBOL}] with ${STEP_TOKENS_SYMBOL} ≤ N (--step-tokens N > 1)`,
  run(model, ctx) {
    const n = stepTokensOf(ctx);
    if (n === 1) return model;
    const out = copyModel(model);
    const steps = [...out.graphs.values()].filter(isStepGraph);
    if (steps.length === 0 && ctx.stepTokensDefault) return model;
    if (steps.length === 0) {
      throw new PlancError(
        'PLANC_E302',
        (opt) =>
          `${opt('stepTokens')} ${n} applies to translation models with a decoder step over past K/V inputs (past_key_values.*.decoder.*, as in decoder_with_past); this model has none`,
      );
    }
    try {
      for (const g of steps) relaxGraph(out, g, n);
    } catch (e) {
      if (!ctx.stepTokensDefault || !(e instanceof PlancError)) throw e;
      ctx.explain?.(
        NAME,
        e.where.node ?? e.where.graph ?? '',
        `the default of ${n} step tokens is not taken: ${e.message}`,
      );
      return model;
    }
    out.decoding = { ...out.decoding, stepTokens: n };
    return out;
  },
};
