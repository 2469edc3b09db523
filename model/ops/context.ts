// Builds the OpContext of a node: typed attribute readers and errors that name the node.
import { PlancError, type Code } from '../../compiler/diagnostics.ts';
import type { Attr, Graph, Node } from '../../compiler/ir.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import type { OpContext } from './types.ts';

export function makeOpContext(node: Node, opset: number, failCode: Code, graphName?: string): OpContext {
  const bad = (name: string, want: string): never => {
    throw new PlancError('PLANC_E203', `attribute '${name}' must be ${want}, got ${node.attrs[name]?.kind}`, {
      node: node.name,
      op: node.op,
      graph: graphName,
    });
  };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  // biome-ignore lint/suspicious/noExplicitAny: an attribute's value, typed by the getter that calls this
  function get(name: string, kind: Attr['kind'], def: unknown): any {
    const a = node.attrs[name];
    if (a === undefined) {
      if (def === undefined)
        throw new PlancError('PLANC_E203', `required attribute '${name}' is missing`, {
          node: node.name,
          op: node.op,
          graph: graphName,
        });
      return def;
    }
    if (a.kind !== kind) bad(name, kind);
    return a.value;
  }
  return {
    node,
    opset,
    has: (name) => node.attrs[name] !== undefined,
    attr: (name) => node.attrs[name],
    int: (name, def) => get(name, 'int', def),
    float: (name, def) => {
      const a = node.attrs[name];
      if (a?.kind === 'int') return a.value; // some exporters write integral floats as ints
      return get(name, 'float', def);
    },
    string: (name, def) => get(name, 'string', def),
    ints: (name, def) => get(name, 'ints', def),
    floats: (name, def) => get(name, 'floats', def),
    strings: (name, def) => get(name, 'strings', def),
    tensor: (name) => get(name, 'tensor', undefined) as Tensor,
    graph: (name) => get(name, 'graph', undefined) as Graph,
    fail: (message) => {
      throw new PlancError(failCode, message, { node: node.name, op: node.op, graph: graphName });
    },
  };
}
