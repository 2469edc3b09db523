// --quantize and --quantize-layers of `planc optimize`, and the quantization report optimize and inspect print.
import { PlancError } from '../compiler/diagnostics.ts';
import type { PlanQuantization } from '../compiler/plan/types.ts';
import { LAYER_PRECISIONS, type LayerPrecision } from '../compiler/quant/layers.ts';
import type { QuantizeRequest } from '../passes/pass.ts';

const MODES = [...LAYER_PRECISIONS.filter((p) => p !== 'float32'), 'auto'] as const;

const isPrecision = (p: string): p is LayerPrecision => (LAYER_PRECISIONS as readonly string[]).includes(p);

/** The request of --quantize MODE [--quantize-layers NODE=P,...]; undefined without --quantize. */
export function parseQuantize(
  mode: string | undefined,
  layers: string | undefined,
): Pick<QuantizeRequest, 'mode' | 'layers'> | undefined {
  if (mode === undefined) {
    if (layers !== undefined) throw new PlancError('PLANC_E301', '--quantize-layers needs --quantize MODE');
    return undefined;
  }
  if (!(MODES as readonly string[]).includes(mode))
    throw new PlancError('PLANC_E301', `--quantize ${mode}: the modes are ${MODES.join(', ')}`);
  const map: Record<string, LayerPrecision> = {};
  for (const part of (layers ?? '').split(',').filter((x) => x.trim())) {
    const eq = part.lastIndexOf('=');
    const node = part.slice(0, eq).trim(),
      p = part.slice(eq + 1).trim();
    if (eq < 1 || !isPrecision(p))
      throw new PlancError(
        'PLANC_E301',
        `--quantize-layers wants NODE=PRECISION[,...] with PRECISION one of ${LAYER_PRECISIONS.join(', ')}; got '${part}'`,
      );
    map[node] = p;
  }
  return { mode: mode as QuantizeRequest['mode'], ...(Object.keys(map).length ? { layers: map } : {}) };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The lines optimize and inspect print about a quantized plan. */
export function formatQuantizationReport(q: PlanQuantization): string[] {
  const count: Record<string, number> = {};
  for (const l of q.layers) count[l.precision] = (count[l.precision] ?? 0) + 1;
  const lines = [
    `quantization: ${q.mode}; products ${Object.entries(count)
      .map(([p, n]) => `${p} ${n}`)
      .join(
        ', ',
      )}; weights ${(q.weightBytes / 1e6).toFixed(1)} MB (float32 ${(q.weightBytesFp32 / 1e6).toFixed(1)} MB, ${(q.weightBytes / Math.max(1, q.weightBytesFp32)).toFixed(2)}x)`,
  ];
  if (q.evalSentences > 0) {
    lines.push(
      `  vs float32 on ${q.evalSentences} sentences of ${q.evalSource}: identical ${pct(q.identicalSentences)}, top-1 agreement ${pct(q.top1Agreement)}${q.hasBleu ? `, BLEU ${q.bleu.toFixed(2)} (float32 ${q.bleuFp32.toFixed(2)})` : ''}; gate ${q.gate}: ${q.gatePassed ? 'passed' : 'FAILED'}`,
    );
  }
  for (const note of q.notes.split('\n').filter((x) => x)) lines.push(`  ${note}`);
  return lines;
}

/** `planc inspect --json`'s quantization object. */
export function quantizationInspect(q: PlanQuantization) {
  return {
    mode: q.mode,
    layers: q.layers.map((l) => ({
      graph: l.graph,
      node: l.node,
      op: l.op,
      dtype: l.precision,
      error: l.error < 0 ? null : l.error,
      reason: l.reason || null,
    })),
    weightBytes: q.weightBytes,
    weightBytesFp32: q.weightBytesFp32,
    evalSentences: q.evalSentences,
    identicalSentences: q.evalSentences ? q.identicalSentences : null,
    top1Agreement: q.evalSentences ? q.top1Agreement : null,
    bleu: q.hasBleu ? q.bleu : null,
    bleuFp32: q.hasBleu ? q.bleuFp32 : null,
    gate: q.gate || null,
    gatePassed: q.evalSentences ? q.gatePassed : null,
  };
}
