// Graph input/output names planc's passes give a plan and its runtime relies on: one place for both sides.

/** int64 scalar input of a decoder step with in-place caches: the rows already cached (binds the past length). */
export const PAST_LENGTH_INPUT = 'past_sequence_length';
/** Prefix of the in-place cache inputs ([batch, heads, capacity, head size]) that replace past_key_values.*. */
export const CACHE_INPUT_PREFIX = 'kv_cache.';
/** The token ids a decoder step reads: [batch, new tokens]. */
export const STEP_INPUT = 'input_ids';
/** The symbol of a decoder step's new-token axis when it takes up to N tokens (`--step-tokens N`, bound N). */
export const STEP_TOKENS_SYMBOL = 'step_tokens';
/** planc.ProjectTopK's outputs, in place of the logits: the k best log-probs and their ids. */
export const TOPK_LOGPROBS_OUTPUT = 'topk_logprobs';
export const TOPK_IDS_OUTPUT = 'topk_ids';
/** The uint8 [vocab] mask input of a shortlist plan, fed per batch by the runtime. */
export const VOCAB_ACTIVE_INPUT = 'vocab_active';
/** The hidden-state output a calibration plan exposes (what planc.ProjectTopK reads). */
export const VOCAB_HIDDEN_OUTPUT = 'vocab_hidden';

// ---- serving: rows that join a running batch (passes/row-lengths.ts builds the graphs, runtime/decode/row-batch.ts runs them) ----
/** The decoder step whose rows each have their own cached length: decoder_with_past's inputs plus ROW_PAST_LENGTHS_INPUT and the row position inputs. */
export const ROWS_STEP_GRAPH = 'decoder_with_past_rows';
/** int64 [batch] input of ROWS_STEP_GRAPH: the positions each row has cached (≤ PAST_LENGTH_INPUT, which is then the longest row's). */
export const ROW_PAST_LENGTHS_INPUT = 'past_lengths';
/** Inputs `row_position.K` of ROWS_STEP_GRAPH ([batch, ...]): what decoder_with_past computed from the past length alone (position embeddings), one row each. */
export const ROW_POSITION_PREFIX = 'row_position.';
/** The graph computing the `row_position.K` values for one past length (batch 1): PAST_LENGTH_INPUT in, `row_position.K` out. */
export const POSITIONS_GRAPH = 'decoder_positions';
/**
 * The first decoder step cut to its encoder K/V outputs (present.*.encoder.*) and the nodes they need, fed the first
 * step's feeds it still reads: sentences joining a running batch run it instead of a whole first step, and their first
 * token comes from the batch's next step at past length 0 (passes/cross-kv.ts builds it, runtime/decode/row-loop.ts
 * runs it).
 */
export const CROSS_KV_GRAPH = 'decoder_cross_kv';

// ---- HRT (docs/hrt.md): position ids on the decoders, and the Skip-CMLM graph ----
/** int64 [batch, tokens] input of an HRT model's decoder graphs: the target position of each input token. */
export const POSITION_IDS_INPUT = 'position_ids';
/** The Skip-CMLM graph: the decoder without its causal mask and without a cache (decoder_nat_model.onnx). */
export const NAT_GRAPH = 'decoder_nat';
/** int64 [batch, tokens] input of NAT_GRAPH: 1 = a real token, 0 = row padding (keys not attended). */
export const NAT_MASK_INPUT = 'decoder_attention_mask';
/** The symbol of NAT_GRAPH's token axis (decoder_sequence_length in the file; renamed so the first-step bound of 1 does not cap it). */
export const NAT_LENGTH_SYMBOL = 'nat_sequence_length';
