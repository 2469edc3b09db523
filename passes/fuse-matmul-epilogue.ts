// Fuses MatMul by a constant 2-D weight + bias Add + activation (Relu, Gelu, gelu written with Erf or with its tanh
// approximation, swish x·Sigmoid(x)) + residual Add into planc.FusedMatMul.
import type { Node } from '../compiler/ir.ts';
import { dimEq, type Dim } from '../compiler/symbolic.ts';
import { fusionPass, type GraphView, type Explain, type Pass, type Rule } from './pass.ts';

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

const ARITHMETIC = ['Add', 'Sub', 'Mul', 'Div', 'Pow'];

/** Coefficients by power of a polynomial in x of degree ≤ 3 (index i: the coefficient of x^i). */
type Poly = number[];

const polyMul = (a: Poly, b: Poly): Poly => {
  const r: Poly = new Array(a.length + b.length - 1).fill(0);
  a.forEach((p, i) =>
    b.forEach((q, j) => {
      r[i + j] = r[i + j]! + p * q;
    }),
  );
  return r;
};

/**
 * A value as a polynomial of x made by Add/Sub/Mul/Div-by-a-constant/Pow-by-a-small-integer from x and scalar
 * constants, adding the nodes it takes to `nodes`; undefined when it is anything else or of degree > 3.
 */
function polyOf(v: GraphView, x: string, value: string, nodes: Set<number>, depth = 0): Poly | undefined {
  if (value === x) return [0, 1];
  const c = v.scalar(value);
  if (c !== undefined) return [c];
  const [k, n] = v.node(value) ?? [];
  if (n?.domain !== '' || !ARITHMETIC.includes(n.op) || depth > 8) return undefined;
  const [a, b] = n.inputs.map((i) => polyOf(v, x, i, nodes, depth + 1));
  if (!a || !b) return undefined;
  const e = b.length === 1 ? b[0]! : NaN;
  let r: Poly | undefined;
  if (n.op === 'Add' || n.op === 'Sub')
    r = Array.from(
      { length: Math.max(a.length, b.length) },
      (_, i) => (a[i] ?? 0) + (n.op === 'Sub' ? -1 : 1) * (b[i] ?? 0),
    );
  else if (n.op === 'Mul') r = polyMul(a, b);
  else if (n.op === 'Div' && e) r = a.map((t) => t / e);
  else if (n.op === 'Pow' && [1, 2, 3].includes(e))
    r = Array.from({ length: e - 1 }).reduce<Poly>((p) => polyMul(p, a), a);
  if (!r || r.length > 4) return undefined;
  nodes.add(k!);
  return r;
}

/** c · x^px · g^pg: a product of the pre-activation x, its gate g and a constant. */
interface Term {
  c: number;
  px: number;
  pg: number;
}

/** The gates of written-out activations x · c · g(x), by the op at their heart: g = Op(arg(x)), or 1 + Op(arg(x)). */
const GATES: Record<string, { act: string; arg: Poly; plus1: boolean; c: number; form: string }> = {
  Sigmoid: { act: 'silu', arg: [0, 1], plus1: false, c: 1, form: 'x · Sigmoid(x)' },
  Erf: { act: 'gelu', arg: [0, Math.SQRT1_2], plus1: true, c: 0.5, form: '½x · (1 + Erf(x/√2))' },
  Tanh: {
    act: 'gelu_tanh',
    arg: [0, Math.sqrt(2 / Math.PI), 0, 0.044715 * Math.sqrt(2 / Math.PI)],
    plus1: true,
    c: 0.5,
    form: '½x · (1 + Tanh(√(2/π)·(x + 0.044715·x³)))',
  },
};

const showPoly = (p: Poly) =>
  p
    .map((c, i) => (c ? `${+c.toPrecision(7)}${['', '·x', '·x²', '·x³'][i]}` : ''))
    .filter((s) => s)
    .join(' + ') || '0';

/** A value's chain of single readers through elementwise arithmetic, up to the first non-arithmetic node. */
function* arithmeticChain(v: GraphView, k: number): Generator<[number, Node]> {
  for (let step: [number, Node] | undefined = [k, v.g.nodes[k]!], hops = 0; step && hops < 8; hops++) {
    yield step;
    if (step[1].domain !== '' || !ARITHMETIC.includes(step[1].op)) return;
    step = v.only(step[1].outputs[0]!);
  }
}

/**
 * An activation written out as c · x · g(x): swish/silu (g = Sigmoid(x), c = 1), gelu (g = 1 + Erf(x / √2), c = ½)
 * or its tanh approximation (g = 1 + Tanh(√(2/π)·(x + 0.044715·x³)), c = ½, x³ as Pow or products), the sums and
 * products in any order and association. Every reader of x and of the parts must be in the pattern.
 */
function decomposedActivation(
  v: GraphView,
  x: string,
  explain: Explain,
): { act: string; nodes: number[]; out: string } | undefined {
  const ops = (value: string) =>
    (v.uses.get(value) ?? []).filter((k) => k >= 0).map((k) => [k, v.g.nodes[k]!] as const);
  const other = (n: Node, value: string) => n.inputs[n.inputs[0] === value ? 1 : 0]!;
  let gate: { act: string; form: string; value: string; nodes: number[]; c: number } | undefined;
  const seen = new Set<number>();
  for (const [k] of ops(x)) {
    for (const [h, n] of arithmeticChain(v, k)) {
      const spec = n.domain === '' ? GATES[n.op] : undefined;
      if (!spec || seen.has(h)) continue;
      seen.add(h);
      const parts = new Set<number>();
      const arg = polyOf(v, x, n.inputs[0]!, parts);
      if (!arg) break;
      if (arg.length !== spec.arg.length || !spec.arg.every((e, i) => (e ? near(arg[i], e) : !arg[i]))) {
        // The right form with other constants (a quick gelu's Sigmoid(1.702·x), a rounded √(2/π)) is worth a word.
        if (arg.length === spec.arg.length && spec.arg.every((e, i) => !e === !arg[i])) {
          explain(`its ${n.op} argument is ${showPoly(arg)}, not ${showPoly(spec.arg)} (${spec.act})`);
        }
        break;
      }
      const plus1 = spec.plus1 ? v.only(n.outputs[0]!) : undefined;
      if (
        spec.plus1 &&
        !(plus1?.[1].op === 'Add' && plus1[1].domain === '' && near(v.scalar(other(plus1[1], n.outputs[0]!)), 1))
      )
        break;
      gate = {
        act: spec.act,
        form: spec.form,
        value: (plus1 ?? [h, n])[1].outputs[0]!,
        nodes: [...parts, h, ...(plus1 ? [plus1[0]] : [])],
        c: spec.c,
      };
      break;
    }
    if (gate) break;
  }
  if (!gate) return undefined;
  // Multiply known terms (and constants) forward until c · x · g appears.
  const terms = new Map<string, Term>([
    [x, { c: 1, px: 1, pg: 0 }],
    [gate.value, { c: 1, px: 0, pg: 1 }],
  ]);
  const nodes = [...gate.nodes];
  for (let grew = true, steps = 0; grew && steps < 4; steps++) {
    grew = false;
    for (const [value, t] of [...terms]) {
      for (const [k, n] of ops(value)) {
        if (nodes.includes(k) || n.domain !== '' || (n.op !== 'Mul' && n.op !== 'Div')) continue;
        const o = other(n, value);
        const ot = terms.get(o) ?? (v.scalar(o) !== undefined ? { c: v.scalar(o)!, px: 0, pg: 0 } : undefined);
        if (!ot || (n.op === 'Div' && (n.inputs[0] !== value || ot.px || ot.pg))) continue;
        const r: Term =
          n.op === 'Div'
            ? { c: t.c / ot.c, px: t.px, pg: t.pg }
            : { c: t.c * ot.c, px: t.px + ot.px, pg: t.pg + ot.pg };
        if (r.px > 1 || r.pg > 1) continue;
        nodes.push(k);
        terms.set(n.outputs[0]!, r);
        grew = true;
        if (r.px === 1 && r.pg === 1 && near(r.c, gate.c)) {
          const inner = [x, ...nodes.flatMap((i) => v.g.nodes[i]!.outputs)].filter((o) => o !== n.outputs[0]);
          if (inner.every((o) => (v.uses.get(o) ?? []).every((u) => nodes.includes(u))))
            return { act: gate.act, nodes, out: n.outputs[0]! };
          return explain(`its ${gate.act} has parts read outside it`);
        }
      }
    }
  }
  return explain(`no ${gate.form} product follows its ${gate.act} gate`);
}

const sameShape = (a: Dim[] | undefined, b: Dim[] | undefined) =>
  !!a && !!b && a.length === b.length && a.every((d, i) => dimEq(d, b[i]!));

interface Match {
  nodes: number[];
  a: string;
  w: string;
  bias: string;
  residual: string;
  activation: string;
  out: string;
}

/** Follows one MatMul: → Add(bias)? → activation? → Add(residual)?. Undefined = decline. */
const epilogue: Rule = (v, i, explain) => {
  const g = v.g;
  const mm = g.nodes[i]!;
  const [a, w] = mm.inputs as [string, string];
  const ws = v.shape(w);
  if (!v.isConst(w) || ws?.length !== 2) return explain('the weight is not a constant 2-D tensor');
  if (v.dtype(a) !== 'float32' || (v.rank(a) ?? 0) < 2) return explain('A is not a float32 tensor of rank ≥ 2');
  const n = ws[1]!;
  const m: Match = { nodes: [i], a, w, bias: '', residual: '', activation: 'none', out: mm.outputs[0]! };
  const take = (k: number, out: string) => {
    m.nodes.push(k);
    m.out = out;
  };
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
  else if (written) {
    m.nodes.push(...written.nodes);
    m.out = written.out;
  }
  if (act || written) {
    m.activation = act ?? written!.act;
    step = v.only(m.out);
  }
  if (step?.[1].op === 'Add' && step[1].domain === '') {
    const other = step[1].inputs.find((x) => x !== m.out) ?? '';
    if (sameShape(v.shape(other), v.shape(m.out)) && !v.isConst(other)) {
      m.residual = other;
      take(step[0], step[1].outputs[0]!);
    } else explain('the Add after it is not a residual of the same shape');
  }
  if (m.nodes.length === 1) return explain('no bias, activation or residual follows it');
  return {
    nodes: m.nodes,
    by: {
      name: `${mm.name}:fused`,
      op: 'FusedMatMul',
      domain: 'planc',
      inputs: [m.a, m.w, m.bias, m.residual],
      outputs: [m.out],
      attrs: { activation: { kind: 'string', value: m.activation } },
      origin: m.nodes.flatMap((k) => g.nodes[k]!.origin),
    },
  };
};

export const FUSE_MATMUL_EPILOGUE: Pass = fusionPass(
  NAME,
  'MatMul(x, W) + bias → activation → + residual  ⇒  planc.FusedMatMul',
  { MatMul: [epilogue] },
);
