// Fuses exported attention subgraphs (QK^T · scale + mask → Softmax → ·V, head split/merge) and ONNX Attention into planc.Attention.
import type { Node } from '../compiler/ir.ts';
import { MASK_KIND } from '../model/ops/planc-attention.ts';
import { dimEq, dimMul, type Dim } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { fusionPass, type Explain, type GraphView, type Pass, type Rule } from './pass.ts';
import { rebuildShape } from './shape-rebuild.ts';

const NAME = 'fuse-attention';

/** What one matched attention block becomes. */
interface Match {
  nodes: number[];
  q: string;
  k: string;
  v: string;
  mask: string;
  maskKind: number;
  scale: number;
  layout: number;
  heads: number;
  out: string;
  /** Shape nodes reading removed values: rebuilt from the shapes of q, k, v. */
  shapeNodes: number[];
  /** Nodes placed before the attention node (K brought to [B,H,S,D]). */
  before: Node[];
  /** The K value the graph had (its shape serves shape rebuilding). */
  kSource: string;
}

/** The block whose Softmax is node i, with Shape readers of the values it removes rebuilt from Q, K, V. */
const softmaxBlock: Rule = (v, i, why) => {
  const m = matchBlock(v, i, why);
  if (!m) return undefined;
  const shapeNodes = [...new Set(m.shapeNodes)];
  const rebuilt = shapeNodes.map((k) =>
    rebuildShape(v.g, v.g.nodes[k]!, v.shape(v.g.nodes[k]!.inputs[0]!)!, [m.q, m.kSource, m.v]),
  );
  if (rebuilt.some((r) => !r)) return why('a Shape of a fused value cannot be rebuilt from Q, K, V');
  const origin = m.nodes.flatMap((k) => v.g.nodes[k]!.origin);
  return [
    { nodes: m.nodes, by: [...m.before, attentionNode(`${v.g.nodes[i]!.name}:attention`, origin, m)] },
    ...shapeNodes.map((k, j) => ({ nodes: [k], by: rebuilt[j]! })),
  ];
};

/** Matches the block whose Softmax is node i. */
function matchBlock(view: GraphView, i: number, why: Explain): Match | undefined {
  const sm = view.g.nodes[i]!;
  const x = sm.inputs[0]!;
  if (view.shape(x)?.length !== 4) return why('the Softmax input is not rank 4');
  const axis = sm.attrs.axis?.kind === 'int' ? sm.attrs.axis.value : -1;
  if (axis !== -1 && axis !== 3) return why(`Softmax axis ${axis} is not the last`);
  const nodes = [i];
  let scale = 1;
  let mask = '';
  let maskKind: number = MASK_KIND.NONE;
  let scores = x;
  // a float→float Cast the exporter leaves before the Softmax (T5) is a no-op
  const cast = view.prod(scores, 'Cast');
  if (cast && view.dtype(cast[1].inputs[0]!) === 'float32') {
    nodes.push(cast[0]);
    scores = cast[1].inputs[0]!;
  }
  // mask: Add(scores, m) or Where(cond, scores, -inf) / Where(cond, -inf, scores)
  const add = view.prod(scores, 'Add');
  const where = view.prod(scores, 'Where');
  if (add) {
    const [a, b] = add[1].inputs as [string, string];
    if (isScores(view, a)) [scores, mask] = [a, b];
    else if (isScores(view, b)) [scores, mask] = [b, a];
    else return why('neither Add operand is QKᵀ');
    maskKind = MASK_KIND.ADD;
    if (view.dtype(mask) !== 'float32') return why('the additive mask is not float32');
    nodes.push(add[0]);
  } else if (where) {
    const [c, a, b] = where[1].inputs as [string, string, string];
    const fa = view.scalar(a),
      fb = view.scalar(b);
    if (fb !== undefined && fb <= -1e9 && isScores(view, a)) [scores, maskKind] = [a, MASK_KIND.BOOL_KEEP];
    else if (fa !== undefined && fa <= -1e9 && isScores(view, b)) [scores, maskKind] = [b, MASK_KIND.BOOL_DROP];
    else return why('the Where does not mask QKᵀ with -inf (or ≤ -1e9)');
    mask = c;
    nodes.push(where[0]);
  }
  if (mask && !maskFits(view, mask, view.shape(x)!))
    return why('the mask does not broadcast to [B,H,Sq,Sk] with dims 1 or full');
  const sc = scaled(view, scores);
  if (sc) {
    scale *= sc.factor;
    nodes.push(sc.index);
    scores = sc.input;
  }
  const mm1 = view.prod(scores, 'MatMul');
  if (!mm1) return why('no MatMul(Q, Kᵀ) before the Softmax');
  nodes.push(mm1[0]);
  const [qs, kts] = mm1[1].inputs as [string, string];
  // Kᵀ may be scaled too (SDPA exports split the scale as √scale on Q and on Kᵀ)
  const ksc = scaled(view, kts);
  if (ksc) {
    scale *= ksc.factor;
    nodes.push(ksc.index);
  }
  const kt = ksc ? ksc.input : kts;
  const tr = view.prod(kt, 'Transpose');
  const perm = tr?.[1].attrs.perm;
  const p = perm?.kind === 'ints' ? perm.value.join() : '';
  if (!tr || (p !== '0,1,3,2' && p !== '0,2,3,1'))
    return why('Kᵀ is not Transpose(K [B,H,S,D], perm 0,1,3,2) or Transpose(K [B,S,H,D], perm 0,2,3,1)');
  nodes.push(tr[0]);
  const kSource = tr[1].inputs[0]!;
  const before: Node[] = [];
  let k = kSource;
  if (p === '0,2,3,1') {
    // K arrives as [B,S,H,D]: the kernel reads [B,H,S,D]; reuse a [B,H,S,D] transpose the graph already makes
    // before this block (the present K of a decoder), else make one (Kᵀ's own transpose goes away)
    const have = (view.uses.get(kSource) ?? []).find((j) => {
      const t = view.g.nodes[j]!;
      return (
        j >= 0 &&
        j < i &&
        t.op === 'Transpose' &&
        t.attrs.perm?.kind === 'ints' &&
        t.attrs.perm.value.join() === '0,2,1,3'
      );
    });
    if (have !== undefined) k = view.g.nodes[have]!.outputs[0]!;
    else k = `${tr[1].name}:bhsd`;
    if (have === undefined)
      before.push({
        name: k,
        op: 'Transpose',
        domain: '',
        inputs: [kSource],
        outputs: [k],
        origin: tr[1].origin,
        attrs: { perm: { kind: 'ints', value: [0, 2, 1, 3] } },
      });
  }
  let q = qs;
  const qsc = scaled(view, qs);
  if (qsc) {
    scale *= qsc.factor;
    nodes.push(qsc.index);
    q = qsc.input;
  }
  const mm2 = view.only(sm.outputs[0]!, []);
  if (mm2?.[1].op !== 'MatMul' || mm2[1].inputs[0] !== sm.outputs[0])
    return why('the Softmax does not feed MatMul(·, V) alone');
  nodes.push(mm2[0]);
  const v = mm2[1].inputs[1]!;
  const ks = view.shape(kSource);
  const kd = p === '0,2,3,1' && ks?.length === 4 ? [ks[0]!, ks[2]!, ks[1]!, ks[3]!] : ks;
  const [qd, vd] = [view.shape(q), view.shape(v)];
  if (qd?.length !== 4 || kd?.length !== 4 || vd?.length !== 4) return why('Q, K, V are not rank 4');
  if (![0, 1, 3].every((a) => dimEq(qd[a]!, kd[a]!) && dimEq(qd[a]!, vd[a]!)) || !dimEq(kd[2]!, vd[2]!))
    return why('Q, K, V shapes do not agree as [B,H,S,D]');
  if (typeof qd[1] !== 'number' || typeof qd[3] !== 'number') return why('heads and head size must be static');
  if ([q, kSource, v].some((t) => view.dtype(t) !== 'float32')) return why('Q, K, V are not float32');
  const m: Match = {
    nodes,
    q,
    k,
    v,
    mask,
    maskKind,
    scale,
    layout: 0,
    heads: qd[1],
    out: mm2[1].outputs[0]!,
    shapeNodes: [],
    before,
    kSource,
  };
  mergeLayout(view, m, qd);
  const inside = new Set(m.nodes);
  for (const k of m.nodes) {
    for (const o of view.g.nodes[k]!.outputs) {
      if (!o || o === m.out) continue;
      const r = view.readers(o, m.shapeNodes);
      if (!r || r.some((j) => !inside.has(j))) return why(`'${o}' is read outside the attention block`);
    }
  }
  return m;
}

/** Whether a is QKᵀ, maybe scaled by a constant: tells scores from mask in Add(scores, mask). */
function isScores(view: GraphView, a: string): boolean {
  const sc = scaled(view, a);
  return view.prod(sc ? sc.input : a, 'MatMul') !== undefined;
}

/** Mul(x, c) / Mul(c, x) / Div(x, c) by a constant scalar c. */
function scaled(view: GraphView, v: string): { index: number; input: string; factor: number } | undefined {
  for (const op of ['Mul', 'Div']) {
    const p = view.prod(v, op);
    if (!p) continue;
    const [a, b] = p[1].inputs as [string, string];
    const cb = view.scalar(b),
      ca = op === 'Mul' ? view.scalar(a) : undefined;
    const input = cb !== undefined ? a : ca !== undefined ? b : undefined;
    const c = cb ?? ca;
    if (input === undefined || c === undefined || c === 0) continue;
    return { index: p[0], input, factor: op === 'Mul' ? c : 1 / c };
  }
  return undefined;
}

function maskFits(view: GraphView, mask: string, full: Dim[]): boolean {
  const md = view.shape(mask);
  if (!md || md.length > 4) return false;
  const pad = [...new Array<Dim>(4 - md.length).fill(1), ...md];
  return pad.every((d, a) => d === 1 || dimEq(d, full[a]!));
}

/**
 * Absorbs the head split of Q (Reshape [B,Sq,H*D] → [B,Sq,H,D], Transpose 0,2,1,3) and the merge of the output
 * (Transpose 0,2,1,3, Reshape → [B,Sq,H*D]) into q_layout 1 when both are there.
 */
function mergeLayout(view: GraphView, m: Match, qd: Dim[]): void {
  const qt = view.prod(m.q, 'Transpose');
  if (qt?.[1].attrs.perm?.kind !== 'ints' || qt[1].attrs.perm.value.join() !== '0,2,1,3') return;
  const qr = view.prod(qt[1].inputs[0]!, 'Reshape');
  if (!qr) return;
  const q3 = qr[1].inputs[0]!;
  const merged = dimMul(qd[1]!, qd[3]!);
  const q3d = view.shape(q3);
  if (q3d?.length !== 3 || !dimEq(q3d[0]!, qd[0]!) || !dimEq(q3d[1]!, qd[2]!) || !dimEq(q3d[2]!, merged)) return;
  const ot = view.only(m.out, []);
  if (ot?.[1].op !== 'Transpose' || ot[1].attrs.perm?.kind !== 'ints' || ot[1].attrs.perm.value.join() !== '0,2,1,3')
    return;
  const or = view.only(ot[1].outputs[0]!, []);
  if (or?.[1].op !== 'Reshape') return;
  const od = view.shape(or[1].outputs[0]!);
  if (od?.length !== 3 || !dimEq(od[0]!, qd[0]!) || !dimEq(od[1]!, qd[2]!) || !dimEq(od[2]!, merged)) return;
  const qOnly = (v: string) => view.readers(v, [])?.length === 1;
  if (!qOnly(m.q) || !qOnly(qt[1].inputs[0]!)) return;
  m.nodes.push(qt[0], qr[0], ot[0], or[0]);
  m.q = q3;
  m.out = or[1].outputs[0]!;
  m.layout = 1;
}

/** ONNX Attention (no past, no softcap, equal heads, only Y used) → planc.Attention, K/V brought to [B,H,S,D]. */
const onnxAttention: Rule = (view, i, why) => {
  const n = view.g.nodes[i]!;
  const [q, k, v, mask = '', pk = '', pv = '', nonpad = ''] = n.inputs;
  if (pk || pv || nonpad) return why('past_key/past_value/nonpad_kv_seqlen are not fused');
  if (n.outputs.slice(1).some((o) => o)) return why('present or qk outputs are used');
  const int = (a: string, d: number) => (n.attrs[a]?.kind === 'int' ? (n.attrs[a] as { value: number }).value : d);
  if ((n.attrs.softcap?.kind === 'float' ? n.attrs.softcap.value : 0) !== 0) return why('softcap is not fused');
  const [qd, kd, vd] = [view.shape(q!), view.shape(k!), view.shape(v!)];
  if (!qd || !kd || !vd || [q, k, v].some((t) => view.dtype(t!) !== 'float32'))
    return why('Q, K, V must be float32 of known rank');
  let heads: number, headSize: number;
  if (qd.length === 4) {
    if (kd.length !== 4 || vd.length !== 4 || typeof qd[1] !== 'number' || typeof qd[3] !== 'number')
      return why('4-D inputs need static heads');
    if (!dimEq(kd[1]!, qd[1]) || !dimEq(vd[3]!, qd[3]) || !dimEq(kd[3]!, qd[3]))
      return why('grouped heads or other V head size');
    [heads, headSize] = [qd[1], qd[3]];
  } else {
    heads = int('q_num_heads', 0);
    if (qd.length !== 3 || kd.length !== 3 || vd.length !== 3 || heads <= 0 || int('kv_num_heads', 0) !== heads)
      return why('3-D inputs need q_num_heads = kv_num_heads');
    if (typeof qd[2] !== 'number' || !dimEq(kd[2]!, qd[2]) || !dimEq(vd[2]!, qd[2]))
      return why("K/V hidden sizes differ from Q's");
    headSize = qd[2] / heads;
  }
  const causal = int('is_causal', 0);
  const sq = qd.length === 4 ? qd[2]! : qd[1]!;
  const sk = kd.length === 4 ? kd[2]! : kd[1]!;
  if (causal && !dimEq(sq, sk)) return why('causal attention with Sq ≠ Sk is not fused');
  const md = mask ? view.shape(mask) : undefined;
  if (mask && (md?.length ?? 5) > 4) return why('the mask rank is over 4');
  if (md?.[md.length - 1] !== undefined && !dimEq(md[md.length - 1]!, sk))
    return why('the mask is not as long as the keys');
  const out: Node[] = [];
  const toBHSD = (x: string): string => {
    if (qd.length === 4) return x;
    const shapeName = `${n.name}:${x}:heads`;
    out.push({
      name: shapeName,
      op: 'Constant',
      domain: '',
      inputs: [],
      outputs: [shapeName],
      origin: n.origin,
      attrs: { value: { kind: 'tensor', value: Tensor.fromNumbers('int64', [4], [0, 0, heads, headSize]) } },
    });
    out.push({
      name: `${shapeName}/split`,
      op: 'Reshape',
      domain: '',
      inputs: [x, shapeName],
      outputs: [`${shapeName}/split`],
      origin: n.origin,
      attrs: {},
    });
    out.push({
      name: `${shapeName}/bhsd`,
      op: 'Transpose',
      domain: '',
      inputs: [`${shapeName}/split`],
      outputs: [`${shapeName}/bhsd`],
      origin: n.origin,
      attrs: { perm: { kind: 'ints', value: [0, 2, 1, 3] } },
    });
    return `${shapeName}/bhsd`;
  };
  const [k4, v4] = [toBHSD(k!), toBHSD(v!)];
  const scale = n.attrs.scale?.kind === 'float' ? n.attrs.scale.value : 1 / Math.sqrt(headSize);
  out.push(
    attentionNode(
      `${n.name}:fused`,
      n.origin,
      {
        q: q!,
        k: k4,
        v: v4,
        mask,
        heads,
        scale,
        layout: qd.length === 4 ? 0 : 1,
        out: n.outputs[0]!,
        maskKind: !mask ? MASK_KIND.NONE : view.dtype(mask) === 'bool' ? MASK_KIND.BOOL_KEEP : MASK_KIND.ADD,
      },
      causal,
    ),
  );
  return { nodes: [i], by: out };
};

function attentionNode(
  name: string,
  origin: string[],
  m: Pick<Match, 'q' | 'k' | 'v' | 'mask' | 'maskKind' | 'heads' | 'scale' | 'layout' | 'out'>,
  causal = 0,
): Node {
  return {
    name,
    op: 'Attention',
    domain: 'planc',
    inputs: [m.q, m.k, m.v, m.mask],
    outputs: [m.out],
    origin,
    attrs: {
      num_heads: { kind: 'int', value: m.heads },
      scale: { kind: 'float', value: m.scale },
      q_layout: { kind: 'int', value: m.layout },
      mask_kind: { kind: 'int', value: m.maskKind },
      is_causal: { kind: 'int', value: causal },
    },
  };
}

export const FUSE_ATTENTION: Pass = fusionPass(
  NAME,
  'QKᵀ·scale (+mask) → Softmax → ·V with head split/merge, or ONNX Attention  ⇒  planc.Attention',
  {
    Softmax: [softmaxBlock],
    Attention: [onnxAttention],
  },
  true,
);
