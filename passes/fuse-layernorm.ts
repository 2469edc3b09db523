// Recognizes decomposed layer norms (ReduceMean, Sub, Pow/Mul, ReduceMean, Add eps, Sqrt, Div, Mul γ, Add β) and
// RMS norms (Pow, ReduceMean, Add eps, Sqrt, Div or 1/· then Mul, Mul γ; float32 → float32 Casts around them absorbed) into
// planc.LayerNorm / planc.RMSNorm.
import type { Node } from '../compiler/ir.ts';
import { fusionPass, type GraphView as View, type Explain, type Pass, type Rewrite, type Rule } from './pass.ts';

const NAME = 'fuse-layernorm';

/** ReduceMean over exactly the last axis with keepdims, in its attribute or input form. */
function lastAxisMean(v: View, n: Node): boolean {
  if (n.op !== 'ReduceMean' || (n.attrs.keepdims?.kind === 'int' && n.attrs.keepdims.value === 0)) return false;
  const rank = v.rank(n.inputs[0]!);
  let axes: number[] | undefined;
  if ((v.model.opsets[''] ?? 1) >= 18) {
    const t = n.inputs[1] ? v.constant(n.inputs[1]) : undefined;
    axes = t ? Array.from(t.nums, Number) : undefined;
  } else if (n.attrs.axes?.kind === 'ints') axes = n.attrs.axes.value;
  return rank !== undefined && axes?.length === 1 && (axes[0] === -1 || axes[0] === rank - 1);
}

/** x², as Pow(x, 2) or Mul(x, x). */
function isSquareOf(v: View, n: Node, x: string): boolean {
  return (
    (n.op === 'Pow' && n.inputs[0] === x && v.scalar(n.inputs[1]!) === 2) ||
    (n.op === 'Mul' && n.inputs[0] === x && n.inputs[1] === x)
  );
}

interface NormMatch {
  nodes: number[];
  x: string;
  gamma: string;
  beta: string;
  eps: number;
  out: string;
  rms: boolean;
}

/** From a variance mean: + eps → Sqrt → (Div(d, s) | Reciprocal or Div(1, s), then Mul d) → Cast? → Mul γ? → Add β?. */
function matchTail(v: View, varMean: [number, Node], d: string, m: NormMatch, explain: Explain): Rewrite | undefined {
  const addEps = v.only(varMean[1].outputs[0]!);
  const eps =
    addEps?.[1].op === 'Add' ? v.scalar(addEps[1].inputs.find((x) => x !== varMean[1].outputs[0]) ?? '') : undefined;
  if (!addEps || eps === undefined) return explain('no constant epsilon added to the variance');
  const sqrt = v.only(addEps[1].outputs[0]!);
  if (sqrt?.[1].op !== 'Sqrt') return explain('the variance is not followed by Sqrt');
  m.nodes.push(varMean[0], addEps[0], sqrt[0]);
  m.eps = eps;
  let norm: [number, Node] | undefined;
  const s = sqrt[1].outputs[0]!;
  const afterSqrt = v.only(s);
  const a = afterSqrt?.[1];
  if (a?.op === 'Div' && a.inputs[0] === d && a.inputs[1] === s) norm = afterSqrt;
  else if (a?.op === 'Reciprocal' || (a?.op === 'Div' && a.inputs[1] === s && v.scalar(a.inputs[0]!) === 1)) {
    const mul = v.only(a.outputs[0]!);
    if (mul?.[1].op === 'Mul' && mul[1].inputs.includes(d)) {
      m.nodes.push(afterSqrt![0]);
      norm = mul;
    }
  }
  if (!norm) return explain('Sqrt is not followed by a division of the centered input');
  m.nodes.push(norm[0]);
  m.out = norm[1].outputs[0]!;
  const cast = v.only(m.out);
  if (cast && sameTypeCast(v, cast[1])) {
    m.nodes.push(cast[0]);
    m.out = cast[1].outputs[0]!;
  }
  const scale = v.only(m.out);
  if (scale?.[1].op === 'Mul') {
    const g = scale[1].inputs.find((x) => x !== m.out)!;
    if (v.isConst(g) && v.rank(g) === 1) {
      m.gamma = g;
      m.nodes.push(scale[0]);
      m.out = scale[1].outputs[0]!;
    }
  }
  const shift = m.gamma ? v.only(m.out) : undefined;
  if (!m.rms && shift?.[1].op === 'Add') {
    const b = shift[1].inputs.find((x) => x !== m.out)!;
    if (v.isConst(b) && v.rank(b) === 1) {
      m.beta = b;
      m.nodes.push(shift[0]);
      m.out = shift[1].outputs[0]!;
    }
  }
  if (!m.gamma) return explain('no constant 1-D scale follows the normalization');
  // A float32 → float32 Cast feeding only the norm (T5 upcasts its input so) goes with it.
  const x = v.node(m.x);
  if (x && sameTypeCast(v, x[1]) && (v.uses.get(m.x) ?? []).every((k) => m.nodes.includes(k))) {
    m.nodes.push(x[0]);
    m.x = x[1].inputs[0]!;
  }
  const origin = m.nodes.flatMap((k) => v.g.nodes[k]!.origin);
  return {
    nodes: m.nodes,
    by: normNode(v.g.nodes[m.nodes[0]!]!, m.rms, m.rms ? [m.x, m.gamma] : [m.x, m.gamma, m.beta], m.out, m.eps, origin),
  };
}

/** A Cast to float32 of a float32 value (a no-op: exports upcast norms' inputs and outputs). */
function sameTypeCast(v: View, n: Node): boolean {
  return (
    n.op === 'Cast' && n.domain === '' && v.dtype(n.inputs[0]!) === 'float32' && v.dtype(n.outputs[0]!) === 'float32'
  );
}

/** Layer norm rooted at the mean of x: Sub(x, mean) feeds both the variance and the division. */
const layerNorm: Rule = (v, i, explain) => {
  const mean = v.g.nodes[i]!;
  const x = mean.inputs[0]!;
  const sub = v.only(mean.outputs[0]!);
  if (
    !lastAxisMean(v, mean) ||
    !sub ||
    sub[1].op !== 'Sub' ||
    sub[1].inputs[0] !== x ||
    sub[1].inputs[1] !== mean.outputs[0]
  )
    return undefined;
  const d = sub[1].outputs[0]!;
  const sq = (v.uses.get(d) ?? []).find((k) => isSquareOf(v, v.g.nodes[k]!, d));
  if (sq === undefined || v.uses.get(d)!.length !== 2) return explain('the centered input is not squared and divided');
  const varMean = v.only(v.g.nodes[sq]!.outputs[0]!);
  if (!varMean || !lastAxisMean(v, varMean[1])) return explain('the square is not averaged over the last axis');
  return matchTail(
    v,
    varMean,
    d,
    { nodes: [i, sub[0], sq], x, gamma: '', beta: '', eps: 0, out: '', rms: false },
    explain,
  );
};

/** RMS norm rooted at the square of x: x / sqrt(mean(x²) + eps) · γ, with x not centered. */
const rmsNorm: Rule = (v, i, explain) => {
  const sq = v.g.nodes[i]!;
  const x = sq.inputs[0]!;
  if (!isSquareOf(v, sq, x)) return undefined;
  if (v.node(x)?.[1].op === 'Sub') return undefined; // centered: a layer norm's square, matched from its mean
  const varMean = v.only(sq.outputs[0]!);
  if (!varMean || !lastAxisMean(v, varMean[1])) return undefined;
  return matchTail(v, varMean, x, { nodes: [i], x, gamma: '', beta: '', eps: 0, out: '', rms: true }, explain);
};

/** ONNX LayerNormalization / RMSNormalization over the last axis, only Y used → the planc op (one norm kernel, counted). */
const onnxNorm: Rule = (v, i, explain) => {
  const n = v.g.nodes[i]!;
  const rank = v.rank(n.inputs[0]!);
  const axis = n.attrs.axis?.kind === 'int' ? n.attrs.axis.value : -1;
  if (rank === undefined || (axis !== -1 && axis !== rank - 1)) return explain('the norm is not over the last axis');
  if (n.outputs.slice(1).some((o) => o)) return explain('mean / inverse std-dev outputs are used');
  if (v.dtype(n.inputs[0]!) !== 'float32') return explain('the input is not float32');
  const eps = n.attrs.epsilon?.kind === 'float' ? n.attrs.epsilon.value : 1e-5;
  return {
    nodes: [i],
    by: normNode(
      n,
      n.op === 'RMSNormalization',
      n.inputs.slice(0, n.op === 'RMSNormalization' ? 2 : 3),
      n.outputs[0]!,
      eps,
      n.origin,
    ),
  };
};

function normNode(root: Node, rms: boolean, inputs: string[], out: string, eps: number, origin: string[]): Node {
  return {
    name: `${root.name}:${rms ? 'rmsnorm' : 'layernorm'}`,
    op: rms ? 'RMSNorm' : 'LayerNorm',
    domain: 'planc',
    inputs,
    outputs: [out],
    attrs: { axis: { kind: 'int', value: -1 }, epsilon: { kind: 'float', value: eps } },
    origin,
  };
}

export const FUSE_LAYERNORM: Pass = fusionPass(
  NAME,
  'decomposed layer / RMS norms and ONNX LayerNormalization / RMSNormalization  ⇒  planc.LayerNorm / planc.RMSNorm',
  {
    LayerNormalization: [onnxNorm],
    RMSNormalization: [onnxNorm],
    ReduceMean: [layerNorm],
    Pow: [rmsNorm],
    Mul: [rmsNorm],
  },
);
