// GraphProto → IR Graph: values with declared types, nodes with origins, attributes of every kind, If subgraphs.
import { dtypeFromOnnx, onnxDtypeName } from '../../compiler/dtype.ts';
import { PlancError } from '../../compiler/diagnostics.ts';
import { MAX_DIM } from '../../compiler/limits.ts';
import type { Attr, Graph, Node, Value, ValueType } from '../../compiler/ir.ts';
import { parseDim, sym, type Dim } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import { sortTopologically } from '../verify.ts';
import type { WeightStore } from '../weights.ts';
import { num, onnx, type OnnxTypes } from './proto.ts';
import { rawBytesOf, tensorFromProto, type TensorSource } from './tensor-proto.ts';

const AT = onnx.AttributeProto.AttributeType;

/** planc writes a node's origin into its doc_string with this prefix when it differs from the node name. */
export const ORIGIN_PREFIX = 'planc.origin:';

export interface ImportCtx {
  src: TensorSource;
  weights: WeightStore;
}

/** Imports a graph. Subgraphs (If branches) are imported the same way; their outer-scope reads stay as names. */
export function importGraph(gp: OnnxTypes.IGraphProto, ctx: ImportCtx, name = gp.name ?? 'main'): Graph {
  const where = { file: ctx.src.file, graph: name };
  const values = new Map<string, Value>();
  const initializers = new Map<string, string>();
  for (const tp of gp.initializer ?? []) {
    const t = tensorFromProto(tp, ctx.src);
    const raw = rawBytesOf(tp, ctx.src);
    const id = ctx.weights.add(t, raw);
    const n = tp.name ?? '';
    initializers.set(n, id);
    values.set(n, { name: n, type: { dtype: t.dtype, shape: [...t.dims] } });
  }
  if ((gp.sparseInitializer ?? []).length > 0) {
    throw new PlancError('PLANC_E004', 'sparse initializers are not supported', where);
  }
  const declare = (vi: OnnxTypes.IValueInfoProto) => {
    const n = vi.name ?? '';
    const type = valueTypeFromProto(vi.type, `value '${n}'`, where);
    const old = values.get(n);
    values.set(n, { name: n, type: old?.type ?? type });
  };
  const inputs: string[] = [];
  for (const vi of gp.input ?? []) {
    declare(vi);
    if (!initializers.has(vi.name ?? '')) inputs.push(vi.name ?? '');
  }
  for (const vi of gp.valueInfo ?? []) declare(vi);
  for (const vi of gp.output ?? []) declare(vi);

  const nodes: Node[] = [];
  const used = new Set<string>();
  (gp.node ?? []).forEach((np, i) => {
    const node = importNode(np, i, used, ctx, where);
    for (const o of node.outputs) if (o && !values.has(o)) values.set(o, { name: o });
    nodes.push(node);
  });
  const graph: Graph = {
    name,
    inputs,
    outputs: (gp.output ?? []).map((o) => o.name ?? ''),
    nodes,
    values,
    initializers,
  };
  sortTopologically(graph, ctx.src.file);
  return graph;
}

function importNode(
  np: OnnxTypes.INodeProto,
  index: number,
  used: Set<string>,
  ctx: ImportCtx,
  where: { file: string; graph: string },
): Node {
  const op = np.opType ?? '';
  let name = np.name || `${op}_${index}`;
  while (used.has(name)) name = `${name}_${index}`;
  used.add(name);
  const domain = np.domain === 'ai.onnx' ? '' : (np.domain ?? '');
  const attrs: Record<string, Attr> = {};
  for (const ap of np.attribute ?? []) {
    attrs[ap.name ?? ''] = importAttr(ap, ctx, { ...where, node: name, op });
  }
  const doc = np.docString ?? '';
  const origin = doc.startsWith(ORIGIN_PREFIX) ? doc.slice(ORIGIN_PREFIX.length).split(',') : [np.name || name];
  return { name, op, domain, inputs: [...(np.input ?? [])], outputs: [...(np.output ?? [])], attrs, origin };
}

function importAttr(
  ap: OnnxTypes.IAttributeProto,
  ctx: ImportCtx,
  where: { file: string; graph: string; node: string; op: string },
): Attr {
  const tensor = (tp: OnnxTypes.ITensorProto): Tensor => tensorFromProto(tp, ctx.src);
  const graph = (g: OnnxTypes.IGraphProto): Graph => importGraph(g, ctx, `${where.graph}/${where.node}.${ap.name}`);
  const str = (b: Uint8Array) => Buffer.from(b).toString('utf8');
  let type = ap.type ?? AT.UNDEFINED;
  if (type === AT.UNDEFINED) type = guessAttrType(ap);
  switch (type) {
    case AT.FLOAT:
      return { kind: 'float', value: ap.f ?? 0 };
    case AT.INT:
      return { kind: 'int', value: num(ap.i) };
    case AT.STRING:
      return { kind: 'string', value: str(ap.s ?? new Uint8Array()) };
    case AT.TENSOR:
      return { kind: 'tensor', value: tensor(ap.t ?? {}) };
    case AT.GRAPH:
      return { kind: 'graph', value: graph(ap.g ?? {}) };
    case AT.FLOATS:
      return { kind: 'floats', value: [...(ap.floats ?? [])] };
    case AT.INTS:
      return { kind: 'ints', value: (ap.ints ?? []).map(num) };
    case AT.STRINGS:
      return { kind: 'strings', value: (ap.strings ?? []).map(str) };
    case AT.TENSORS:
      return { kind: 'tensors', value: (ap.tensors ?? []).map(tensor) };
    case AT.GRAPHS:
      return { kind: 'graphs', value: (ap.graphs ?? []).map(graph) };
    default:
      throw new PlancError(
        'PLANC_E203',
        `attribute '${ap.name}' has kind ${AT[type] ?? type}, which planc does not support`,
        where,
      );
  }
}

function guessAttrType(ap: OnnxTypes.IAttributeProto): number {
  if (ap.floats?.length) return AT.FLOATS;
  if (ap.ints?.length) return AT.INTS;
  if (ap.strings?.length) return AT.STRINGS;
  if (ap.tensors?.length) return AT.TENSORS;
  if (ap.graphs?.length) return AT.GRAPHS;
  if (ap.t) return AT.TENSOR;
  if (ap.g) return AT.GRAPH;
  if (ap.s?.length) return AT.STRING;
  if (ap.i !== undefined && ap.i !== null && num(ap.i) !== 0) return AT.INT;
  return AT.FLOAT;
}

/** TypeProto → ValueType (tensors only); dims with a dim_param become symbols, missing dims fresh unknowns. */
export function valueTypeFromProto(
  tp: OnnxTypes.ITypeProto | null | undefined,
  what: string,
  where: object,
): ValueType | undefined {
  if (!tp) return undefined;
  if (tp.sequenceType || tp.mapType || tp.optionalType) {
    throw new PlancError(
      'PLANC_E004',
      `${what} is a ${tp.sequenceType ? 'sequence' : tp.mapType ? 'map' : 'optional'}, which planc does not support`,
      where,
    );
  }
  const tt = tp.tensorType;
  if (!tt) return undefined;
  const code = tt.elemType ?? 0;
  const dtype = dtypeFromOnnx(code);
  if (!dtype)
    throw new PlancError('PLANC_E004', `${what} has dtype ${onnxDtypeName(code)}, which planc does not support`, where);
  if (!tt.shape) return { dtype };
  const shape: Dim[] = (tt.shape.dim ?? []).map((d, i) => {
    const which = (d as { value?: string }).value;
    if (which === 'dimValue') {
      const v = num(d.dimValue);
      if (v > MAX_DIM)
        throw new PlancError(
          'PLANC_E008',
          `${what} declares dim ${i} = ${v}; planc takes dims up to ${MAX_DIM}`,
          where,
        );
      return v;
    }
    if (which === 'dimParam' && d.dimParam) return parseDim(d.dimParam);
    return sym(`${what.replace(/^value '(.*)'$/, '$1')}_dim${i}`);
  });
  return { dtype, shape };
}
