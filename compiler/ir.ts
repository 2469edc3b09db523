// The IR: a Model of named Graphs sharing deduplicated weights; Graphs of typed Values and Nodes with origins.
import type { DType } from './dtype.ts';
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

/** Decoding facts of a translation model (filled from config files where present). */
export interface DecodingFacts {
  decoderStartId?: number;
  eosId?: number;
  padId?: number;
  unkId?: number;
  bosId?: number;
  vocabSize?: number;
  maxLength?: number;
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
}
