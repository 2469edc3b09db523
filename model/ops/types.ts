// The operator table's contract: one handler per op (and opset range) with shape/dtype inference and evaluation.
import type { DType } from '../../compiler/dtype.ts';
import type { Attr, Graph, Node, ValueType } from '../../compiler/ir.ts';
import type { Dim } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';

/** What inference knows about an input: its type, and its contents when they are known. */
export interface InferInput {
  dtype: DType;
  /** Undefined = unknown rank. */
  shape?: Dim[];
  /** The whole tensor, when it is a constant (initializer, Constant, or folded). */
  value?: Tensor;
  /**
   * For rank-0/1 integer tensors computed from shapes: each element as a Dim (number or symbol expression),
   * e.g. Shape(x) of x:[batch,src_len,512] gives [batch, src_len, 512]. Row-major; rank-0 has one element.
   */
  sym?: Dim[];
}

/** What inference returns per output: its type and, for shape computations, its elements as Dims. */
export interface InferOutput extends ValueType {
  /** Elements as Dims, for rank-0/1 integer outputs computed from shapes (see InferInput.sym). */
  sym?: Dim[];
}

/** Attribute access and error reporting for one node. Attribute readers throw PLANC_E203 on a wrong kind. */
export interface OpContext {
  readonly node: Node;
  /** The opset version of the node's domain in this model. */
  readonly opset: number;
  has(name: string): boolean;
  attr(name: string): Attr | undefined;
  int(name: string, def?: number): number;
  float(name: string, def?: number): number;
  string(name: string, def?: string): string;
  ints(name: string, def?: number[]): number[];
  floats(name: string, def?: number[]): number[];
  strings(name: string, def?: string[]): string[];
  tensor(name: string): Tensor;
  graph(name: string): Graph;
  /** Throws a PlancError naming this node and op (code PLANC_E201 in inference, PLANC_E202 in evaluation). */
  fail(message: string): never;
}

export interface InferContext extends OpContext {
  /** Infers a subgraph (If branches, Loop/Scan bodies given their input types) in the current scope; returns its output types. */
  inferSubgraph(g: Graph, inputs?: ValueType[]): ValueType[];
}

export interface EvalContext extends OpContext {
  /** Runs a subgraph (If branches, graph attributes taking inputs) in the current scope; returns its outputs. */
  runSubgraph(g: Graph, inputs?: Tensor[]): Tensor[];
}

export interface OpHandler {
  op: string;
  /** '' (default) is ai.onnx. */
  domain?: string;
  /** Opset range this handler implements: since ≤ opset < until. Defaults: 1 and ∞. */
  since?: number;
  until?: number;
  /**
   * Output types (one per node output, optional trailing outputs included) from input facts.
   * Missing optional inputs are undefined. Unknown dims may be left as fresh symbols via `unknownDim()`.
   */
  infer(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[];
  /** Exact ONNX semantics. Missing optional inputs are undefined. Returns one tensor per output. */
  eval(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[];
}
