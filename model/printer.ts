// The IR as stable, diff-friendly text: what golden tests compare and what `--dump-after` prints.
import type { Attr, Graph, Model, Node, ValueType } from '../compiler/ir.ts';
import { dimStr, shapeStr } from '../compiler/symbolic.ts';
import type { Tensor } from '../compiler/tensor.ts';

export function typeStr(t: ValueType | undefined): string {
  return t ? `${t.dtype}${shapeStr(t.shape)}` : '?';
}

function tensorStr(t: Tensor): string {
  const head = `${t.dtype}[${t.dims.join(',')}]`;
  if (t.size > 8) return `tensor ${head}`;
  const vals = t.dtype === 'string' ? t.strings.map((s) => JSON.stringify(s)) : Array.from(t.nums, (x) => String(x));
  return `${head}{${vals.join(',')}}`;
}

function attrStr(a: Attr, indent: string): string {
  switch (a.kind) {
    case 'int':
    case 'float':
      return String(a.value);
    case 'string':
      return JSON.stringify(a.value);
    case 'ints':
    case 'floats':
      return `[${a.value.join(',')}]`;
    case 'strings':
      return `[${a.value.map((s) => JSON.stringify(s)).join(',')}]`;
    case 'tensor':
      return tensorStr(a.value);
    case 'tensors':
      return `[${a.value.map(tensorStr).join(', ')}]`;
    case 'graph':
      return `\n${printGraph(a.value, indent + '    ').trimEnd()}\n${indent}  `;
    case 'graphs':
      return `[${a.value.map((g) => `\n${printGraph(g, indent + '    ').trimEnd()}`).join(',')}\n${indent}  ]`;
  }
}

function nodeStr(n: Node, g: Graph, indent: string): string {
  const outs = n.outputs.map((o) => (o ? `%${o}` : '_')).join(', ');
  const ins = n.inputs.map((x) => (x ? `%${x}` : '_')).join(', ');
  const op = n.domain ? `${n.domain}.${n.op}` : n.op;
  const keys = Object.keys(n.attrs).sort();
  const attrs = keys.length ? ` {${keys.map((k) => `${k}=${attrStr(n.attrs[k]!, indent)}`).join(', ')}}` : '';
  const types = n.outputs
    .filter((o) => o)
    .map((o) => typeStr(g.values.get(o)?.type))
    .join(', ');
  const origin = n.origin.length === 1 && n.origin[0] === n.name ? '' : `  # from ${n.origin.join(', ')}`;
  return `${indent}  ${outs} = ${op}(${ins})${attrs} : ${types}  # ${n.name}${origin}`;
}

/** One graph as text. Initializers are listed with their weight ids (content hashes), so shared weights show. */
export function printGraph(g: Graph, indent = ''): string {
  const lines: string[] = [];
  const symOf = (n: string) => {
    const s = g.values.get(n)?.type?.sym;
    return s ? ` = (${s.map(dimStr).join(', ')})` : '';
  };
  const io = (names: string[]) => names.map((n) => `%${n}: ${typeStr(g.values.get(n)?.type)}${symOf(n)}`).join(', ');
  lines.push(`${indent}graph ${g.name}(${io(g.inputs)}) -> (${io(g.outputs)})`);
  for (const [name, id] of [...g.initializers].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    lines.push(`${indent}  init %${name}: ${typeStr(g.values.get(name)?.type)} = weight ${id}`);
  }
  for (const n of g.nodes) lines.push(nodeStr(n, g, indent));
  return lines.join('\n') + '\n';
}

/** The whole model: opsets, decoding facts and each graph in name order. */
export function printModel(m: Model): string {
  const opsets = Object.entries(m.opsets)
    .sort()
    .map(([d, v]) => `${d || 'ai.onnx'}=${v}`)
    .join(' ');
  const facts = Object.entries(m.decoding)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  const head = `model opsets(${opsets})${facts ? ` decoding(${facts})` : ''} weights=${m.weights.size}\n`;
  return (
    head +
    [...m.graphs.keys()]
      .sort()
      .map((k) => printGraph(m.graphs.get(k)!))
      .join('\n')
  );
}
