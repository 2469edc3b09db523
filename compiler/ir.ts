// The IR: a Model of named Graphs sharing deduplicated weights; Graphs of typed Values and Nodes with origins.
import type { DType } from './dtype.ts';
import type { QuantizedLayer } from './quant/layers.ts';
import type { Dim } from './symbolic.ts';
import type { Tensor } from './tensor.ts';

/** A value's static type: dtype and shape (undefined shape = unknown rank; a dim may be symbolic). */
export interface ValueType {
  dtype: DType;
  shape?: Dim[];
  /**
   * For a graph input holding lengths (an int64 scalar or vector): its elements as symbolic dims. planc's in-place
   * KV cache adds such an input (the past length); the runtime binds the symbols from the feed's values.
   */
  sym?: Dim[];
}

export interface Value {
  name: string;
  /** Undefined until declared by the model or inferred. */
  type?: ValueType;
}

export type Attr =
  | { kind: 'int'; value: number }
  | { kind: 'float'; value: number }
  | { kind: 'string'; value: string }
  | { kind: 'tensor'; value: Tensor }
  | { kind: 'graph'; value: Graph }
  | { kind: 'ints'; value: number[] }
  | { kind: 'floats'; value: number[] }
  | { kind: 'strings'; value: string[] }
  | { kind: 'tensors'; value: Tensor[] }
  | { kind: 'graphs'; value: Graph[] };

export interface Node {
  /** Unique within its graph (import names unnamed nodes `op_N`). */
  name: string;
  op: string;
  /** '' is the default ONNX domain; 'planc' holds planc's own ops. */
  domain: string;
  /** Input value names; '' marks an omitted optional input. */
  inputs: string[];
  outputs: string[];
  attrs: Record<string, Attr>;
  /** Names of the user's ONNX nodes this node came from. */
  origin: string[];
}

export interface Graph {
  name: string;
  inputs: string[];
  outputs: string[];
  nodes: Node[];
  /** Every value the graph defines or reads, by name (inputs, initializers, node outputs). */
  values: Map<string, Value>;
  /** Initializer value name → weight id in Model.weights (or in the enclosing model for subgraphs). */
  initializers: Map<string, string>;
}

/**
 * Decoding facts of a translation model: config.json and generation_config.json (the latter wins), the conventions
 * transformers' generate() applies. Lists are empty when absent once read from a plan.
 */
export interface DecodingFacts {
  decoderStartId?: number;
  /** The first (or only) eos id; eosIds holds all of them (any one ends a sentence). */
  eosId?: number;
  eosIds?: number[];
  padId?: number;
  unkId?: number;
  bosId?: number;
  vocabSize?: number;
  /** max_length: counts the decoder start token (so max_length - 1 new tokens). */
  maxLength?: number;
  maxNewTokens?: number;
  /** Default beam size (num_beams). */
  numBeams?: number;
  /** Forced as the first generated token (the target language of mBART-50, M2M100, NLLB). */
  forcedBosId?: number;
  /** Forced at the last allowed step. */
  forcedEosId?: number;
  /** suppress_tokens: never generated. */
  suppressTokens?: number[];
  /** suppress_tokens at the first free step (begin_suppress_tokens). */
  beginSuppressTokens?: number[];
  /** bad_words_ids (the protobuf shape): one id bans it every step; a sequence bans its last id after the rest. */
  badWords?: { ids: number[] }[];
  /** early_stopping, as text: 'true' (done at num_beams finished), 'false' (done when no running beam can win at its
   * current length) or 'never' (... at the maximum length, for a positive length penalty). */
  earlyStopping?: 'true' | 'false' | 'never';
  /** length_penalty: a finished hypothesis scores (sum of its log-probs) / length^length_penalty. */
  lengthPenalty?: number;
  /** num_return_sequences: the hypotheses returned per source. */
  numReturnSequences?: number;
  /** min_length: counts the decoder start token (so eos is banned before min_length - 1 new tokens). */
  minLength?: number;
  /** min_new_tokens: eos is banned before this many new tokens. */
  minNewTokens?: number;
  /** no_repeat_ngram_size: no n-gram of this size occurs twice in a hypothesis. */
  noRepeatNgramSize?: number;
  /** encoder_no_repeat_ngram_size: no n-gram of the source occurs in a hypothesis. */
  encoderNoRepeatNgramSize?: number;
  /** repetition_penalty: CTRL's penalty on the logits of tokens already generated (1 = none). */
  repetitionPenalty?: number;
  /** do_sample: generate() draws each token from the warped distribution instead of taking the best. */
  doSample?: boolean;
  /** temperature: sampling divides the scores by it (generate() uses it only with do_sample). */
  temperature?: number;
  /** top_k: sampling keeps the k best tokens (0 = all; generate()'s default 50). */
  topK?: number;
  /** top_p: sampling keeps the fewest best tokens whose probability reaches top_p (1 = all). */
  topP?: number;
  /** Not from the config: the most new tokens one decoder_with_past step takes (`planc optimize --step-tokens`; absent = 1). */
  stepTokens?: number;
  /** An HRT model's contract (config.json's hrt section, checked: model/onnx/hrt-contract.ts); absent for other models. */
  hrt?: HrtFacts;
}

/** What HRT decoding (docs/hrt.md, runtime/decode/hrt.ts) needs of a model, as its plan records it. */
export interface HrtFacts {
  /** Contract version (1). */
  version: number;
  /** The chunk sizes k the plan decodes, 1 (plain AT) first, then config.json's hrt.chunk_sizes ascending. */
  chunkSizes: number[];
  /** The start token of each chunk size, parallel to chunkSizes ([BOS_k]; k = 1: the decoder start id). */
  bosIds: number[];
  /** [MASK], the Skip-CMLM placeholder. */
  maskId: number;
  /** Rows of the embedding table: the vocabulary plus the input-only ids. */
  inputVocabSize: number;
  /** Positions the decoder's table covers (max_position_embeddings; 0 = unknown): every position id must be below it. */
  maxPositions: number;
}

/** A weight stored once: content hash id → tensor, with where it came from. */
export interface Weight {
  id: string;
  tensor: Tensor;
  /** Bytes as in the source files, per occurrence (for stored-vs-unique accounting). */
  bytes: number;
}

export interface Model {
  graphs: Map<string, Graph>;
  weights: Map<string, Weight>;
  /** Opset version per domain ('' = ai.onnx). */
  opsets: Record<string, number>;
  irVersion: number;
  producer?: string;
  decoding: DecodingFacts;
  /** Files the model was read from, per graph. */
  sources: Record<string, string>;
  /** Bytes of initializers as stored across all source files (duplicates counted each time). */
  storedWeightBytes: number;
  /** The nodes passes/memoize.ts computed at optimize time (their outputs are weights now). */
  memoized?: MemoizedNode[];
  /** The products passes/quantize.ts rewrote. */
  quantized?: QuantizedLayer[];
}

/** One node computed at optimize time, as `planc inspect` lists it. */
export interface MemoizedNode {
  graph: string;
  node: string;
  op: string;
  /** Bytes of its outputs, now weights. */
  bytes: number;
  /** The same op on the same weights was computed for an earlier graph: its result is reused, stored once. */
  reused: boolean;
}
