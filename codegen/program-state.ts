// What the program passes share: the build options, the state each pass fills in list order, and a pass's shape.
import type { Model } from '../compiler/ir.ts';
import type { PlanDecoding, PlanHeader, PlanProgram } from '../compiler/plan/types.ts';
import type { VariantChoices } from './cpu-variants.ts';
import type { CudaBuild } from './cuda/build.ts';
import type { Instance } from './cuda/rules.ts';
import type { PlanWeights } from './lower.ts';
import type { MemoryReport } from './memory-plan.ts';
import type { ProfileOptions } from './profile.ts';

export interface BuildOptions extends ProfileOptions {
  target: 'cpu' | 'cuda';
  /** cuda: the sm archs to compile for (default sm_80, sm_90). */
  archs?: string[];
  /** Called at each step with a short message (the CLI shows progress). */
  onProgress?: (step: string) => void;
  /** Creation options recorded in the plan. */
  options?: Record<string, string>;
  /** The tokenizer file to embed in the plan (`planc optimize` finds it in the model folder). */
  tokenizer?: { bytes: Uint8Array; kind: 'spm' | 'hf' };
  /** Special token ids that override the model's config.json / generation_config.json. */
  specialIds?: SpecialIds;
  /** cpu: kernel variants to force, by kernel or IR node name (codegen/cpu-variants.ts VariantChoices). */
  variants?: VariantChoices;
}

export interface SpecialIds {
  decoderStartId?: number;
  eosId?: number;
  padId?: number;
  unkId?: number;
}

export interface GraphReport extends MemoryReport {
  graph: string;
  kernels: number;
  tensors: number;
}

/** What the program passes work on: each fills its part, in list order. */
export interface ProgramState {
  /** The IR after the IR passes. */
  readonly model: Model;
  readonly options: BuildOptions;
  /** The decoding facts the plan records (special ids applied; checked before anything is lowered). */
  readonly decoding: PlanDecoding;
  /** Upper bound of every runtime symbol (from the profile). */
  readonly symbolMax: Record<string, number>;
  /** lower: the weights every program shares, and one program per graph. */
  weights: PlanWeights;
  programs: PlanProgram[];
  /** select-variants (cuda): per program, per kernel call, the launch variants in the order the runtime tries them. */
  variants?: Instance[][][];
  /** Decisions recorded in the plan (header.tuning): select-variants' choices on cuda (cpu's are in the kernels). */
  tuning: PlanHeader['tuning'];
  /** plan-memory: arena offsets assigned, one report per program. */
  memoryPlanned: boolean;
  reports: GraphReport[];
  /** build-cuda: the generated and compiled kernels. */
  cuda?: CudaBuild;
  /** pack: the plan's header and weight blob. */
  header?: PlanHeader;
  blob?: Uint8Array;
}

export interface ProgramPass {
  name: string;
  /** One line: what the pass does. */
  summary: string;
  /** The only target it runs for (others run for every target). */
  target?: 'cpu' | 'cuda';
  run(s: ProgramState): void;
}
