// One tokenizer interface over SentencePiece models (.spm/.model) and Hugging Face tokenizer.json files.
import { PlancError, type Text } from '../../compiler/diagnostics.ts';
import { worded } from '../../compiler/diagnostics-catalog.ts';
import type { PlanHeader } from '../../compiler/plan/types.ts';
import { loadHfTokenizer } from './hf.ts';
import { loadSpmTokenizer } from './spm.ts';
import type { Tokenizer, TokenizerKind } from './types.ts';

export type { Tokenizer, TokenizerKind } from './types.ts';

/** Loads a tokenizer from the bytes of its file; `name` names it in errors; `eosId` ends SentencePiece sources (default: its </s>). */
export async function loadTokenizer(
  bytes: Uint8Array,
  kind: TokenizerKind,
  name = '<tokenizer>',
  eosId?: number,
): Promise<Tokenizer> {
  if (bytes.length === 0) throw new PlancError('PLANC_E010', `tokenizer ${name} is empty`, { file: name });
  try {
    return kind === 'spm' ? await loadSpmTokenizer(bytes, eosId) : loadHfTokenizer(bytes);
  } catch (e) {
    if (e instanceof PlancError) throw e;
    throw new PlancError('PLANC_E010', `cannot read ${kind} tokenizer ${name}: ${(e as Error).message ?? e}`, {
      file: name,
    });
  }
}

/** The tokenizer kind a file name implies: .spm/.model → spm, *.json → hf; undefined otherwise. */
export function tokenizerKindOf(file: string): TokenizerKind | undefined {
  if (/\.(spm|model)$/i.test(file)) return 'spm';
  if (/\.json$/i.test(file)) return 'hf';
  return undefined;
}

const planTokenizers = new WeakMap<object, Promise<Tokenizer>>();

/** A plan's embedded tokenizer (loaded once per plan); a PlancError naming the plan and `why` when it has none. */
export function planTokenizer(
  plan: { header: PlanHeader; source: string },
  why: Text = (opt) => `translate token ids (translateIds, or ${opt('ids')})`,
): Promise<Tokenizer> {
  let t = planTokenizers.get(plan);
  if (!t) {
    const h = plan.header;
    if (h.tokenizerKind === '' || h.tokenizer.length === 0) {
      throw new PlancError(
        'PLANC_E407',
        (opt) =>
          `plan ${plan.source} has no tokenizer: ${worded(why, opt)}, or optimize it again with ${opt('tokenizer')} FILE`,
        { file: plan.source },
      );
    }
    t = loadTokenizer(
      h.tokenizer,
      h.tokenizerKind,
      `${plan.source} (embedded ${h.tokenizerKind} tokenizer)`,
      h.decoding.eosId,
    );
    planTokenizers.set(plan, t);
  }
  return t;
}
