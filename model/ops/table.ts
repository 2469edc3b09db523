// The operator table: op type (and domain, opset) → handler. Every family file contributes its handlers here.
import type { OpHandler } from './types.ts';
import { PLANC_FUSED_OPS, setHandlerLookup } from './planc-fused.ts';
import { PLANC_ATTENTION_OPS } from './planc-attention.ts';
import { ELEMENTWISE_OPS } from './elementwise.ts';
import { MOVEMENT_OPS } from './movement.ts';
import { MATH_OPS } from './math.ts';
import { ATTENTION_OPS } from './attention.ts';
import { CONTROL_OPS } from './control.ts';
import { CONV_OPS } from './conv.ts';
import { EXTRA_OPS } from './extra.ts';
import { PLANC_PROJECT_TOPK_OPS } from './planc-project-topk.ts';
import { PLANC_QUANT_OPS } from './planc-quant.ts';
import { PLANC_VOCAB_OPS } from './planc-vocab.ts';

const ALL: OpHandler[] = [
  ...ELEMENTWISE_OPS,
  ...MOVEMENT_OPS,
  ...MATH_OPS,
  ...ATTENTION_OPS,
  ...CONTROL_OPS,
  ...CONV_OPS,
  ...EXTRA_OPS,
  ...PLANC_FUSED_OPS,
  ...PLANC_ATTENTION_OPS,
  ...PLANC_PROJECT_TOPK_OPS,
  ...PLANC_QUANT_OPS,
  ...PLANC_VOCAB_OPS,
];

const BY_KEY = new Map<string, OpHandler[]>();
for (const h of ALL) {
  const key = `${h.domain ?? ''}:${h.op}`;
  const list = BY_KEY.get(key) ?? [];
  list.push(h);
  BY_KEY.set(key, list);
}

/** The handler for an op at an opset, or undefined when planc does not support it there. */
export function findHandler(domain: string, op: string, opset: number): OpHandler | undefined {
  const d = domain === 'ai.onnx' ? '' : domain;
  return BY_KEY.get(`${d}:${op}`)?.find((h) => (h.since ?? 1) <= opset && opset < (h.until ?? Infinity));
}

setHandlerLookup(findHandler);

/** The highest opset any ai.onnx handler starts at: the newest ONNX opset planc knows. */
export function maxOnnxOpset(): number {
  return Math.max(...ALL.filter((h) => !h.domain || h.domain === 'ai.onnx').map((h) => h.since ?? 1));
}

/** Every supported op key ('' domain → bare name), for reports. */
export function supportedOps(): string[] {
  return [...BY_KEY.keys()].map((k) => (k.startsWith(':') ? k.slice(1) : k)).sort();
}
