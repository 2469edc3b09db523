// Recomputes Shape(x) from values that survive a rewrite, so a fusion may remove x while shape math still reads it.
import type { Graph, Node } from '../compiler/ir.ts';
import { dimEq, type Dim } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';

function int64Const(name: string, values: number[]): Node {
  return {
    name,
    op: 'Constant',
    domain: '',
    inputs: [],
    outputs: [name],
    origin: [],
    attrs: { value: { kind: 'tensor', value: Tensor.fromNumbers('int64', [values.length], values) } },
  };
}

/** The dims a Shape node reads (its start/end attributes applied). */
function shapeSlice(n: Node, dims: Dim[]): Dim[] {
  const clamp = (a: number) => Math.min(dims.length, Math.max(0, a < 0 ? a + dims.length : a));
  const start = n.attrs.start?.kind === 'int' ? n.attrs.start.value : 0;
  const end = n.attrs.end?.kind === 'int' ? n.attrs.end.value : dims.length;
  return dims.slice(clamp(start), clamp(end));
}

/** An int64 scalar value known to hold `dim` (e.g. the past-length input of an in-place cache). */
export interface ScalarSource {
  value: string;
  dim: Dim;
}

/**
 * Nodes that compute the same int64 vector as the Shape node `shape` (whose input has `dims`) from the shapes of
 * `sources` (values defined before `shape`), scalar sources and constants; undefined when a symbolic dim is in none.
 */
export function rebuildShape(
  g: Graph,
  shape: Node,
  dims: Dim[],
  sources: string[],
  scalars: ScalarSource[] = [],
): Node[] | undefined {
  const nodes: Node[] = [];
  const parts: string[] = [];
  const base = `${shape.name}:rebuilt`;
  for (const [k, d] of shapeSlice(shape, dims).entries()) {
    const part = `${base}/dim${k}`;
    const scalar = scalars.find((x) => dimEq(x.dim, d));
    if (typeof d === 'number') {
      nodes.push(int64Const(part, [d]));
    } else if (scalar) {
      nodes.push(int64Const(`${part}/one`, [1]));
      nodes.push({
        name: part,
        op: 'Reshape',
        domain: '',
        inputs: [scalar.value, `${part}/one`],
        outputs: [part],
        attrs: {},
        origin: shape.origin,
      });
    } else {
      const hit = sources
        .flatMap((s) => (g.values.get(s)?.type?.shape ?? []).map((x, axis) => ({ s, axis, x })))
        .find((c) => dimEq(c.x, d));
      if (!hit) return undefined;
      nodes.push({
        name: `${part}/shape`,
        op: 'Shape',
        domain: '',
        inputs: [hit.s],
        outputs: [`${part}/shape`],
        attrs: {},
        origin: shape.origin,
      });
      nodes.push(int64Const(`${part}/axis`, [hit.axis]));
      nodes.push({
        name: part,
        op: 'Gather',
        domain: '',
        inputs: [`${part}/shape`, `${part}/axis`],
        outputs: [part],
        attrs: { axis: { kind: 'int', value: 0 } },
        origin: shape.origin,
      });
    }
    parts.push(part);
  }
  if (parts.length === 0) return [{ ...int64Const(base, []), outputs: [shape.outputs[0]!] }];
  nodes.push({
    name: base,
    op: 'Concat',
    domain: '',
    inputs: parts,
    outputs: [shape.outputs[0]!],
    attrs: { axis: { kind: 'int', value: 0 } },
    origin: shape.origin,
  });
  return nodes;
}
