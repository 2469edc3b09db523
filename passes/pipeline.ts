// The ordered list of IR passes `planc optimize` runs, and the driver that infers and verifies after each one.
import { inferModel } from '../model/infer/infer.ts';
import type { Model } from '../compiler/ir.ts';
import { printModel } from '../model/printer.ts';
import { verifyModel } from '../model/verify.ts';
import { FUSE_ATTENTION } from './fuse-attention.ts';
import { FUSE_LAYERNORM } from './fuse-layernorm.ts';
import { FUSE_MATMUL_EPILOGUE } from './fuse-matmul-epilogue.ts';
import { MEMOIZE } from './memoize.ts';
import { KV_CACHE_IN_PLACE } from './kv-cache-in-place.ts';
import { ROW_LENGTHS } from './row-lengths.ts';
import { FUSE_PROJECT_TOPK } from './fuse-project-topk.ts';
import { checkStepTokens, STEP_TOKENS } from './step-tokens.ts';
import type { Pass, PassContext } from './pass.ts';
import { VOCAB_REWRITE } from './vocab-rewrite.ts';
import { QUANTIZE } from './quantize.ts';
import { SHARE_QUANTIZED_ROWS } from './share-quantized-rows.ts';
import { CROSS_KV } from './cross-kv.ts';

export const PIPELINE: Pass[] = [
  MEMOIZE,
  STEP_TOKENS,
  FUSE_LAYERNORM,
  FUSE_MATMUL_EPILOGUE,
  FUSE_ATTENTION,
  KV_CACHE_IN_PLACE,
  ROW_LENGTHS,
  FUSE_PROJECT_TOPK,
  VOCAB_REWRITE,
  QUANTIZE,
  SHARE_QUANTIZED_ROWS,
  CROSS_KV,
];

/** The k of planc.ProjectTopK in translation plans: beam search needs 2 × beam candidates per row, so beams up to 4. */
export const TRANSLATE_TOPK = 8;

/** The hooks of a pass list (IR passes here, program passes in codegen/program-passes.ts): progress and dumps. */
export interface PassHooks {
  /** Print the state after this pass (or after every pass: 'all'); the compile driver checks the name against both lists. */
  dumpAfter?: string;
  onDump?: (pass: string, text: string) => void;
  onPass?: (pass: string) => void;
}

export interface PipelineOptions extends PassContext, PassHooks {
  /** Passes to skip, by name ('fuse' skips every fusion). */
  disable?: string[];
}

/** Runs the IR passes; the model is inferred before and verified (types included) after every pass. */
export function runPipeline(model: Model, opts: PipelineOptions = {}): Model {
  checkStepTokens(opts);
  inferModel(model);
  let m = model;
  for (const pass of PIPELINE) {
    if (opts.disable?.includes(pass.name) || (opts.disable?.includes('fuse') && pass.name.startsWith('fuse'))) continue;
    opts.onPass?.(pass.name);
    m = pass.run(m, opts);
    inferModel(m);
    verifyModel(m, { pass: pass.name });
    if (opts.dumpAfter === pass.name || opts.dumpAfter === 'all') opts.onDump?.(pass.name, printModel(m));
  }
  return m;
}
