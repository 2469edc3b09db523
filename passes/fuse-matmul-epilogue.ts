// Fuses MatMul by a constant 2-D weight + bias Add + activation (Relu, Gelu, gelu written with Erf, swish x·Sigmoid(x))
// + residual Add into planc.FusedMatMul.
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { dimEq, type Dim } from '../compiler/symbolic.ts';
import { fusionPass, GraphView, Rewrites, type Pass, type PassContext } from './pass.ts';

const NAME = 'fuse-matmul-epilogue';

/** The activation attribute of planc.FusedMatMul for an activation op, or undefined. */
function activationOf(n: Node): string | undefined {
  if (n.domain !== '') return undefined;
  if (n.op === 'Relu') return 'relu';
  if (n.op === 'Gelu') {
    const a = n.attrs.approximate;
    return a?.kind === 'string' && a.value === 'tanh' ? 'gelu_tanh' : 'gelu';
  }
  return undefined;
}

const near = (a: number | undefined, b: number) => a !== undefined && Math.abs(a - b) <= 1e-6 * Math.abs(b);

/** c · x^px · g^pg: a product of the pre-activation x, its gate g and a constant. */
interface Term { c: number; px: number; pg: number }

/**
 * An activation written out as x · g(x) · c: swish/silu (g = Sigmoid(x), c = 1) or gelu (g = 1 + Erf(x / √2),
 * c = ½), the products in any order and association. Every reader of x and of the parts must be in the pattern.
 */
function decomposedActivation(v: GraphView, x: string, explain: (why: string) => void): { act: string; nodes: number[]; out: string } | undefined {
  const ops = (value: string) => (v.uses.get(value) ?? []).filter((k) => k >= 0).map((k) => [k, v.g.nodes[k]!] as const);
  const other = (n: Node, value: string) => n.inputs[n.inputs[0] === value ? 1 : 0]!;
  let gate: { act: string; value: string; nodes: number[]; c: number } | undefined;
  for (const [k, n] of ops(x)) {
    if (n.domain !== '') continue;
    if (n.op === 'Sigmoid') gate = { act: 'silu', value: n.outputs[0]!, nodes: [k], c: 1 };
    const scaled = (n.op === 'Div' && n.inputs[0] === x && near(v.scalar(n.inputs[1]!), Math.SQRT2))
      || (n.op === 'Mul' && near(v.scalar(other(n, x)), Math.SQRT1_2));
    const erf = scaled ? v.only(n.outputs[0]!) : undefined;
    const plus1 = erf?.[1].op === 'Erf' ? v.only(erf[1].outputs[0]!) : undefined;
    if (plus1?.[1].op === 'Add' && v.scalar(other(plus1[1], erf![1].outputs[0]!)) === 1) {
      gate = { act: 'gelu', value: plus1[1].outputs[0]!, nodes: [k, erf![0], plus1[0]], c: 0.5 };
    }
    if (gate) break;
  }
  if (!gate) return undefined;
  // Multiply known terms (and constants) forward until c · x · g appears.
  const terms = new Map<string, Term>([[x, { c: 1, px: 1, pg: 0 }], [gate.value, { c: 1, px: 0, pg: 1 }]]);
  const nodes = [...gate.nodes];
  for (let grew = true, steps = 0; grew && steps < 4; steps++) {
    grew = false;
    for (const [value, t] of [...terms]) {
      for (const [k, n] of ops(value)) {
        if (nodes.includes(k) || n.domain !== '' || (n.op !== 'Mul' && n.op !== 'Div')) continue;
        const o = other(n, value);
        const ot = terms.get(o) ?? (v.scalar(o) !== undefined ? { c: v.scalar(o)!, px: 0, pg: 0 } : undefined);
        if (!ot || (n.op === 'Div' && (n.inputs[0] !== value || ot.px || ot.pg))) continue;
        const r: Term = n.op === 'Div' ? { c: t.c / ot.c, px: t.px, pg: t.pg } : { c: t.c * ot.c, px: t.px + ot.px, pg: t.pg + ot.pg };
        if (r.px > 1 || r.pg > 1) continue;
        nodes.push(k);
        terms.set(n.outputs[0]!, r);
        grew = true;
        if (r.px === 1 && r.pg === 1 && near(r.c, gate.c)) {
          const inner = [x, ...nodes.flatMap((i) => v.g.nodes[i]!.outputs)].filter((o) => o !== n.outputs[0]);
          if (inner.every((o) => (v.uses.get(o) ?? []).every((u) => nodes.includes(u)))) return { act: gate.act, nodes, out: n.outputs[0]! };
          return explain(`its ${gate.act} has parts read outside it`), undefined;
        }
      }
    }
  }
  return explain(`no x · ${gate.act === 'silu' ? 'Sigmoid(x)' : '½(1 + Erf(x/√2))'} product follows its ${gate.act === 'silu' ? 'Sigmoid' : 'Erf'}`), undefined;
}

const sameShape = (a: Dim[] | undefined, b: Dim[] | undefined) => !!a && !!b && a.length === b.length && a.every((d, i) => dimEq(d, b[i]!));

interface Match { nodes: number[]; a: string; w: string; bias: string; residual: string; activation: string; out: string }

/** Follows one MatMul: → Add(bias)? → activation? → Add(residual)?. Undefined = decline. */
function matchAt(v: GraphView, i: number, explain: (why: string) => void): Match | undefined {
  const g = v.g;
  const mm = g.nodes[i]!;
  const [a, w] = mm.inputs as [string, string];
  const ws = v.shape(w);
  if (!v.isConst(w) || ws?.length !== 2) return explain('the weight is not a constant 2-D tensor'), undefined;
  if (v.dtype(a) !== 'float32' || (v.rank(a) ?? 0) < 2) return explain('A is not a float32 tensor of rank ≥ 2'), undefined;
  const n = ws[1]!;
  const m: Match = { nodes: [i], a, w, bias: '', residual: '', activation: 'none', out: mm.outputs[0]! };
  const take = (k: number, out: string) => { m.nodes.push(k); m.out = out; };
  let step = v.only(m.out);
  if (step?.[1].op === 'Add' && step[1].domain === '') {
    const other = step[1].inputs.find((x) => x !== m.out) ?? '';
    const t = v.shape(other);
    if (v.isConst(other) && t?.length === 1 && dimEq(t[0]!, n)) {
      m.bias = other;
      take(step[0], step[1].outputs[0]!);
      step = v.only(m.out);
    }
  }
  const act = step && activationOf(step[1]);
  const written = act ? undefined : decomposedActivation(v, m.out, explain);
  if (act) take(step![0], step![1].outputs[0]!);
  else if (written) { m.nodes.push(...written.nodes); m.out = written.out; }
  if (act || written) { m.activation = act ?? written!.act; step = v.only(m.out); }
  if (step?.[1].op === 'Add' && step[1].domain === '') {
    const other = step[1].inputs.find((x) => x !== m.out) ?? '';
    if (sameShape(v.shape(other), v.shape(m.out)) && !v.isConst(other)) {
      m.residual = other;
      take(step[0], step[1].outputs[0]!);
    } else explain('the Add after it is not a residual of the same shape');
  }
  if (m.nodes.length === 1) return explain('no bias, activation or residual follows it'), undefined;
  return m;
}

function fuseGraph(g: Graph, model: Model, ctx: PassContext): number {
  const v = new GraphView(g, model);
  const rewrites = new Rewrites();
  g.nodes.forEach((n, i) => {
    if (n.op !== 'MatMul' || n.domain !== '' || rewrites.taken(i)) return;
    const m = matchAt(v, i, (why) => ctx.explain?.(NAME, n.name, why));
    if (!m) return;
    rewrites.replace(m.nodes, {
      name: `${n.name}:fused`, op: 'FusedMatMul', domain: 'planc', inputs: [m.a, m.w, m.bias, m.residual], outputs: [m.out],
      attrs: { activation: { kind: 'string', value: m.activation } }, origin: m.nodes.flatMap((k) => g.nodes[k]!.origin),
    });
  });
  return rewrites.apply(g);
}

export const FUSE_MATMUL_EPILOGUE: Pass = fusionPass(NAME, 'MatMul(x, W) + bias → activation → + residual  ⇒  planc.FusedMatMul', fuseGraph);
