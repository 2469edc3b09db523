// The plans a server holds: each with its name, tokenizer, scheduler (one decode loop per plan) and public description.
import * as path from 'node:path';
import { PlancError } from '../compiler/diagnostics.ts';
import { Scheduler, type SchedulerOptions } from '../runtime/decode/scheduler.ts';
import { languageTokens } from '../runtime/decode/translate-ids.ts';
import type { Plan } from '../runtime/plan.ts';
import { planTokenizer, type Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { sourceIds } from '../runtime/translate.ts';

/** What GET /v1/models says of a plan. */
export interface ModelDescription {
  name: string;
  target: string;
  /** Language tokens the tokenizer has (targetLang choices) and the plan's own forced first token, if any. */
  languages: string[];
  forcedBos: string | null;
  profile: { maxBatch: number; maxSrcLen: number; maxTgtLen: number };
  numBeams: number | null;
  quantization: { mode: string; precisions: string[] } | null;
  vocab: { method: string } | null;
  plancVersion: string;
  created: string;
}

export interface ServedModel {
  name: string;
  plan: Plan;
  tokenizer: Tokenizer;
  scheduler: Scheduler;
  description: ModelDescription;
  ready: boolean;
}

/** A plan's name in requests: its file name without the .plan extension. */
export function modelName(plan: Plan): string {
  return path.basename(plan.source).replace(/\.plan$/i, '') || 'model';
}

async function describe(name: string, plan: Plan, tok: Tokenizer): Promise<ModelDescription> {
  const h = plan.header;
  const d = h.decoding;
  const forced = d.forcedBosId === undefined ? null : tok.decode([d.forcedBosId]) || String(d.forcedBosId);
  const q = h.quantization;
  return {
    name,
    target: h.target.kind,
    languages: languageTokens(tok),
    forcedBos: forced,
    profile: { maxBatch: h.profile.maxBatch, maxSrcLen: h.profile.maxSrcLen, maxTgtLen: h.profile.maxTgtLen },
    numBeams: d.numBeams ?? null,
    quantization: q ? { mode: q.mode, precisions: [...new Set(q.layers.map((l) => l.precision))] } : null,
    vocab: h.vocab ? { method: h.vocab.method } : null,
    plancVersion: h.plancVersion,
    created: h.created,
  };
}

/** Opens a scheduler and reads the tokenizer of each plan; names must be unique. */
export async function serveModels(
  plans: Plan[],
  options: SchedulerOptions,
  hooks: {
    onStep?: (model: string, rows: number, ms: number) => void;
    onStart?: (model: string, sentences: number, ms: number) => void;
  } = {},
): Promise<Map<string, ServedModel>> {
  if (plans.length === 0) throw new PlancError('PLANC_E302', 'a server needs at least one plan');
  const out = new Map<string, ServedModel>();
  for (const plan of plans) {
    const name = modelName(plan);
    if (out.has(name))
      throw new PlancError(
        'PLANC_E302',
        `two plans are named '${name}' (${out.get(name)!.plan.source} and ${plan.source}): models are named by their file name, so give them different names`,
      );
    const tokenizer = await planTokenizer(plan, 'planc serve translates text');
    const scheduler = new Scheduler(plan, {
      ...options,
      onStep: (rows, ms) => hooks.onStep?.(name, rows, ms),
      onStart: (sentences, ms) => hooks.onStart?.(name, sentences, ms),
    });
    out.set(name, {
      name,
      plan,
      tokenizer,
      scheduler,
      description: await describe(name, plan, tokenizer),
      ready: false,
    });
  }
  return out;
}

/** Translates one short sentence through each model's scheduler (kernels, pools and tokenizer warm); marks it ready. */
export async function warmUp(models: Map<string, ServedModel>): Promise<void> {
  for (const m of models.values()) {
    const outcomes = await m.scheduler.submit([sourceIds(m.tokenizer, 'hello world')], { maxLength: 4 });
    const failed = outcomes.find((o) => o.error);
    if (failed?.error) throw failed.error;
    m.ready = true;
  }
}
