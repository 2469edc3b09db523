// Fuses MatMul by a constant 2-D weight + bias Add + activation (Relu, Gelu) + residual Add into planc.FusedMatMul.
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { dimEq, type Dim } from '../compiler/symbolic.ts';
import { consumers, fusionPass, Rewrites, type Pass, type PassContext } from './pass.ts';

const NAME = 'fuse-matmul-epilogue';

/** The activation attribute of planc.FusedMatMul for an activation node, or undefined. */
function activationOf(n: Node): string | undefined {
  if (n.op === 'Relu') return 'relu';
  if (n.op === 'Gelu') {
    const a = n.attrs.approximate;
    return a?.kind === 'string' && a.value === 'tanh' ? 'gelu_tanh' : 'gelu';
  }
  return undefined;
}

const sameShape = (a: Dim[] | undefined, b: Dim[] | undefined) => !!a && !!b && a.length === b.length && a.every((d, i) => dimEq(d, b[i]!));

interface Match { nodes: number[]; a: string; w: string; bias: string; residual: string; activation: string; out: string }

/** Follows one MatMul's single-consumer chain: MatMul → Add(bias)? → act? → Add(residual)?. Undefined = decline. */
function matchAt(g: Graph, i: number, uses: Map<string, number[]>, explain: (why: string) => void): Match | undefined {
  const mm = g.nodes[i]!;
  const [a, w] = mm.inputs as [string, string];
  const wType = g.values.get(w)?.type;
  const aType = g.values.get(a)?.type;
  if (!g.initializers.has(w) || wType?.shape?.length !== 2) return explain('the weight is not a constant 2-D tensor'), undefined;
  if (aType?.dtype !== 'float32' || (aType.shape?.length ?? 0) < 2) return explain('A is not a float32 tensor of rank ≥ 2'), undefined;
  const n = wType.shape[1]!;
  const m: Match = { nodes: [i], a, w, bias: '', residual: '', activation: 'none', out: mm.outputs[0]! };
  const next = (): [number, Node] | undefined => {
    const u = uses.get(m.out) ?? [];
    if (u.length !== 1 || u[0]! < 0) return undefined;
    return [u[0]!, g.nodes[u[0]!]!];
  };
  let step = next();
  if (step && step[1].op === 'Add') {
    const other = step[1].inputs.find((x) => x !== m.out) ?? '';
    const t = g.values.get(other)?.type;
    const last = t?.shape?.[t.shape.length - 1];
    if (g.initializers.has(other) && t?.shape?.length === 1 && last !== undefined && dimEq(last, n)) {
      m.bias = other;
      m.nodes.push(step[0]);
      m.out = step[1].outputs[0]!;
      step = next();
    }
  }
  if (step && activationOf(step[1])) {
    m.activation = activationOf(step[1])!;
    m.nodes.push(step[0]);
    m.out = step[1].outputs[0]!;
    step = next();
  }
  if (step && step[1].op === 'Add') {
    const other = step[1].inputs.find((x) => x !== m.out) ?? '';
    if (sameShape(g.values.get(other)?.type?.shape, g.values.get(m.out)?.type?.shape) && !g.initializers.has(other)) {
      m.residual = other;
      m.nodes.push(step[0]);
      m.out = step[1].outputs[0]!;
    } else explain(`the Add after it is not a residual of the same shape`);
  }
  if (m.nodes.length === 1) return explain('no bias, activation or residual follows it'), undefined;
  return m;
}

function fuseGraph(g: Graph, _model: Model, ctx: PassContext): number {
  const uses = consumers(g);
  const rewrites = new Rewrites();
  g.nodes.forEach((n, i) => {
    if (n.op !== 'MatMul' || n.domain !== '' || rewrites.taken(i)) return;
    const m = matchAt(g, i, uses, (why) => ctx.explain?.(NAME, n.name, why));
    if (!m) return;
    rewrites.replace(m.nodes, {
      name: `${n.name}:fused`, op: 'FusedMatMul', domain: 'planc', inputs: [m.a, m.w, m.bias, m.residual], outputs: [m.out],
      attrs: { activation: { kind: 'string', value: m.activation } }, origin: m.nodes.flatMap((k) => g.nodes[k]!.origin),
    });
  });
  return rewrites.apply(g);
}

export const FUSE_MATMUL_EPILOGUE: Pass = fusionPass(NAME, 'MatMul(x, W) + bias → activation → + residual  ⇒  planc.FusedMatMul', fuseGraph);
