// Fuses exported attention subgraphs (QK^T · scale + mask → Softmax → ·V, head split/merge) and ONNX Attention into planc.Attention.
import { Diagnostics } from '../compiler/diagnostics.ts';
import { inferGraph, type Facts } from '../compiler/infer/infer.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { MASK_KIND } from '../compiler/ops/planc-attention.ts';
import { dimEq, dimMul, type Dim } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { consumers, fusionPass, Rewrites, type Pass, type PassContext } from './pass.ts';
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

class Matcher {
  private readonly uses: Map<string, number[]>;
  private readonly producer = new Map<string, number>();

  constructor(private readonly g: Graph, private readonly facts: Facts, private readonly explain: (node: string, why: string) => void) {
    this.uses = consumers(g);
    g.nodes.forEach((n, i) => n.outputs.forEach((o) => o && this.producer.set(o, i)));
  }

  shape(v: string): Dim[] | undefined { return this.facts.get(v)?.shape; }

  /** The node producing v when it has op `op` (default domain). */
  prod(v: string, op: string): [number, Node] | undefined {
    const i = this.producer.get(v);
    if (i === undefined) return undefined;
    const n = this.g.nodes[i]!;
    return n.op === op && n.domain === '' ? [i, n] : undefined;
  }

  /** A constant scalar's value. */
  scalar(v: string): number | undefined {
    const t = this.facts.get(v)?.value;
    return t && t.size === 1 && (t.dtype === 'float32' || t.dtype === 'float64' || t.dtype === 'float16') ? t.nums[0] : undefined;
  }

  /** Node indices reading v, Shape nodes apart; undefined when v is a graph output. */
  readers(v: string, shapes: number[]): number[] | undefined {
    const out: number[] = [];
    for (const i of this.uses.get(v) ?? []) {
      if (i < 0) return undefined;
      const n = this.g.nodes[i]!;
      if (n.op === 'Shape' && n.domain === '') shapes.push(i);
      else out.push(i);
    }
    return out;
  }

  /** The single non-Shape reader of v, or undefined. */
  only(v: string): [number, Node] | undefined {
    const r = this.readers(v, []);
    return r?.length === 1 ? [r[0]!, this.g.nodes[r[0]!]!] : undefined;
  }

  /** Matches the block whose Softmax is node i. */
  at(i: number): Match | undefined {
    const sm = this.g.nodes[i]!;
    const why = (w: string): undefined => { this.explain(sm.name, w); return undefined; };
    const x = sm.inputs[0]!;
    if (this.shape(x)?.length !== 4) return why('the Softmax input is not rank 4');
    const axis = sm.attrs.axis?.kind === 'int' ? sm.attrs.axis.value : -1;
    if (axis !== -1 && axis !== 3) return why(`Softmax axis ${axis} is not the last`);
    const nodes = [i];
    let scale = 1;
    let mask = '';
    let maskKind: number = MASK_KIND.NONE;
    let scores = x;
    // a float→float Cast the exporter leaves before the Softmax (T5) is a no-op
    const cast = this.prod(scores, 'Cast');
    if (cast && this.facts.get(cast[1].inputs[0]!)?.dtype === 'float32') { nodes.push(cast[0]); scores = cast[1].inputs[0]!; }
    // mask: Add(scores, m) or Where(cond, scores, -inf) / Where(cond, -inf, scores)
    const add = this.prod(scores, 'Add');
    const where = this.prod(scores, 'Where');
    if (add) {
      const [a, b] = add[1].inputs as [string, string];
      if (this.isScores(a)) [scores, mask] = [a, b];
      else if (this.isScores(b)) [scores, mask] = [b, a];
      else return why('neither Add operand is QKᵀ');
      maskKind = MASK_KIND.ADD;
      if (this.facts.get(mask)?.dtype !== 'float32') return why('the additive mask is not float32');
      nodes.push(add[0]);
    } else if (where) {
      const [c, a, b] = where[1].inputs as [string, string, string];
      const fa = this.scalar(a), fb = this.scalar(b);
      if (fb !== undefined && fb <= -1e9 && this.isScores(a)) [scores, maskKind] = [a, MASK_KIND.BOOL_KEEP];
      else if (fa !== undefined && fa <= -1e9 && this.isScores(b)) [scores, maskKind] = [b, MASK_KIND.BOOL_DROP];
      else return why('the Where does not mask QKᵀ with -inf (or ≤ -1e9)');
      mask = c;
      nodes.push(where[0]);
    }
    if (mask && !this.maskFits(mask, this.shape(x)!)) return why('the mask does not broadcast to [B,H,Sq,Sk] with dims 1 or full');
    const sc = this.scaled(scores);
    if (sc) { scale *= sc.factor; nodes.push(sc.index); scores = sc.input; }
    const mm1 = this.prod(scores, 'MatMul');
    if (!mm1) return why('no MatMul(Q, Kᵀ) before the Softmax');
    nodes.push(mm1[0]);
    const [qs, kts] = mm1[1].inputs as [string, string];
    // Kᵀ may be scaled too (SDPA exports split the scale as √scale on Q and on Kᵀ)
    const ksc = this.scaled(kts);
    if (ksc) { scale *= ksc.factor; nodes.push(ksc.index); }
    const kt = ksc ? ksc.input : kts;
    const tr = this.prod(kt, 'Transpose');
    const perm = tr?.[1].attrs.perm;
    const p = perm?.kind === 'ints' ? perm.value.join() : '';
    if (!tr || (p !== '0,1,3,2' && p !== '0,2,3,1')) return why('Kᵀ is not Transpose(K [B,H,S,D], perm 0,1,3,2) or Transpose(K [B,S,H,D], perm 0,2,3,1)');
    nodes.push(tr[0]);
    const kSource = tr[1].inputs[0]!;
    const before: Node[] = [];
    let k = kSource;
    if (p === '0,2,3,1') {
      // K arrives as [B,S,H,D]: the kernel reads [B,H,S,D]; reuse a [B,H,S,D] transpose the graph already makes
      // before this block (the present K of a decoder), else make one (Kᵀ's own transpose goes away)
      const have = (this.uses.get(kSource) ?? []).find((j) => {
        const t = this.g.nodes[j]!;
        return j >= 0 && j < i && t.op === 'Transpose' && t.attrs.perm?.kind === 'ints' && t.attrs.perm.value.join() === '0,2,1,3';
      });
      if (have !== undefined) k = this.g.nodes[have]!.outputs[0]!;
      else k = `${tr[1].name}:bhsd`;
      if (have === undefined) before.push({ name: k, op: 'Transpose', domain: '', inputs: [kSource], outputs: [k], origin: tr[1].origin, attrs: { perm: { kind: 'ints', value: [0, 2, 1, 3] } } });
    }
    let q = qs;
    const qsc = this.scaled(qs);
    if (qsc) { scale *= qsc.factor; nodes.push(qsc.index); q = qsc.input; }
    const mm2 = this.only(sm.outputs[0]!);
    if (!mm2 || mm2[1].op !== 'MatMul' || mm2[1].inputs[0] !== sm.outputs[0]) return why('the Softmax does not feed MatMul(·, V) alone');
    nodes.push(mm2[0]);
    const v = mm2[1].inputs[1]!;
    const ks = this.shape(kSource);
    const kd = p === '0,2,3,1' && ks?.length === 4 ? [ks[0]!, ks[2]!, ks[1]!, ks[3]!] : ks;
    const [qd, vd] = [this.shape(q), this.shape(v)];
    if (qd?.length !== 4 || kd?.length !== 4 || vd?.length !== 4) return why('Q, K, V are not rank 4');
    if (![0, 1, 3].every((a) => dimEq(qd[a]!, kd[a]!) && dimEq(qd[a]!, vd[a]!)) || !dimEq(kd[2]!, vd[2]!)) return why('Q, K, V shapes do not agree as [B,H,S,D]');
    if (typeof qd[1] !== 'number' || typeof qd[3] !== 'number') return why('heads and head size must be static');
    if ([q, kSource, v].some((t) => this.facts.get(t)?.dtype !== 'float32')) return why('Q, K, V are not float32');
    const m: Match = { nodes, q, k, v, mask, maskKind, scale, layout: 0, heads: qd[1], out: mm2[1].outputs[0]!, shapeNodes: [], before, kSource };
    this.mergeLayout(m, qd);
    const inside = new Set(m.nodes);
    for (const k of m.nodes) {
      for (const o of this.g.nodes[k]!.outputs) {
        if (!o || o === m.out) continue;
        const r = this.readers(o, m.shapeNodes);
        if (!r || r.some((j) => !inside.has(j))) return why(`'${o}' is read outside the attention block`);
      }
    }
    return m;
  }

  /** Whether a is QKᵀ, maybe scaled by a constant: tells scores from mask in Add(scores, mask). */
  private isScores(a: string): boolean {
    const sc = this.scaled(a);
    return this.prod(sc ? sc.input : a, 'MatMul') !== undefined;
  }

  /** Mul(x, c) / Mul(c, x) / Div(x, c) by a constant scalar c. */
  private scaled(v: string): { index: number; input: string; factor: number } | undefined {
    for (const op of ['Mul', 'Div']) {
      const p = this.prod(v, op);
      if (!p) continue;
      const [a, b] = p[1].inputs as [string, string];
      const cb = this.scalar(b), ca = op === 'Mul' ? this.scalar(a) : undefined;
      const input = cb !== undefined ? a : ca !== undefined ? b : undefined;
      const c = cb ?? ca;
      if (input === undefined || c === undefined || c === 0) continue;
      return { index: p[0], input, factor: op === 'Mul' ? c : 1 / c };
    }
    return undefined;
  }

  private maskFits(mask: string, full: Dim[]): boolean {
    const md = this.shape(mask);
    if (!md || md.length > 4) return false;
    const pad = [...new Array<Dim>(4 - md.length).fill(1), ...md];
    return pad.every((d, a) => d === 1 || dimEq(d, full[a]!));
  }

  /**
   * Absorbs the head split of Q (Reshape [B,Sq,H*D] → [B,Sq,H,D], Transpose 0,2,1,3) and the merge of the output
   * (Transpose 0,2,1,3, Reshape → [B,Sq,H*D]) into q_layout 1 when both are there.
   */
  private mergeLayout(m: Match, qd: Dim[]): void {
    const qt = this.prod(m.q, 'Transpose');
    if (!qt || qt[1].attrs.perm?.kind !== 'ints' || qt[1].attrs.perm.value.join() !== '0,2,1,3') return;
    const qr = this.prod(qt[1].inputs[0]!, 'Reshape');
    if (!qr) return;
    const q3 = qr[1].inputs[0]!;
    const merged = dimMul(qd[1]!, qd[3]!);
    const q3d = this.shape(q3);
    if (q3d?.length !== 3 || !dimEq(q3d[0]!, qd[0]!) || !dimEq(q3d[1]!, qd[2]!) || !dimEq(q3d[2]!, merged)) return;
    const ot = this.only(m.out);
    if (!ot || ot[1].op !== 'Transpose' || ot[1].attrs.perm?.kind !== 'ints' || ot[1].attrs.perm.value.join() !== '0,2,1,3') return;
    const or = this.only(ot[1].outputs[0]!);
    if (!or || or[1].op !== 'Reshape') return;
    const od = this.shape(or[1].outputs[0]!);
    if (od?.length !== 3 || !dimEq(od[0]!, qd[0]!) || !dimEq(od[1]!, qd[2]!) || !dimEq(od[2]!, merged)) return;
    const qOnly = (v: string) => this.readers(v, [])?.length === 1;
    if (!qOnly(m.q) || !qOnly(qt[1].inputs[0]!)) return;
    m.nodes.push(qt[0], qr[0], ot[0], or[0]);
    m.q = q3;
    m.out = or[1].outputs[0]!;
    m.layout = 1;
  }
}

/** ONNX Attention (no past, no softcap, equal heads, only Y used) → planc.Attention, K/V brought to [B,H,S,D]. */
function fromOnnxAttention(g: Graph, n: Node, facts: Facts, explain: (why: string) => void): Node[] | undefined {
  const why = (w: string): undefined => { explain(w); return undefined; };
  const [q, k, v, mask = '', pk = '', pv = '', nonpad = ''] = n.inputs;
  if (pk || pv || nonpad) return why('past_key/past_value/nonpad_kv_seqlen are not fused');
  if (n.outputs.slice(1).some((o) => o)) return why('present or qk outputs are used');
  const int = (a: string, d: number) => (n.attrs[a]?.kind === 'int' ? (n.attrs[a] as { value: number }).value : d);
  if ((n.attrs.softcap?.kind === 'float' ? n.attrs.softcap.value : 0) !== 0) return why('softcap is not fused');
  const [qd, kd, vd] = [facts.get(q!)?.shape, facts.get(k!)?.shape, facts.get(v!)?.shape];
  if (!qd || !kd || !vd || [q, k, v].some((t) => facts.get(t!)?.dtype !== 'float32')) return why('Q, K, V must be float32 of known rank');
  let heads: number, headSize: number;
  if (qd.length === 4) {
    if (kd.length !== 4 || vd.length !== 4 || typeof qd[1] !== 'number' || typeof qd[3] !== 'number') return why('4-D inputs need static heads');
    if (!dimEq(kd[1]!, qd[1]) || !dimEq(vd[3]!, qd[3]) || !dimEq(kd[3]!, qd[3])) return why('grouped heads or other V head size');
    [heads, headSize] = [qd[1], qd[3]];
  } else {
    heads = int('q_num_heads', 0);
    if (qd.length !== 3 || kd.length !== 3 || vd.length !== 3 || heads <= 0 || int('kv_num_heads', 0) !== heads) return why('3-D inputs need q_num_heads = kv_num_heads');
    if (typeof qd[2] !== 'number' || !dimEq(kd[2]!, qd[2]) || !dimEq(vd[2]!, qd[2])) return why('K/V hidden sizes differ from Q\'s');
    headSize = qd[2] / heads;
  }
  const causal = int('is_causal', 0);
  const sq = qd.length === 4 ? qd[2]! : qd[1]!;
  const sk = kd.length === 4 ? kd[2]! : kd[1]!;
  if (causal && !dimEq(sq, sk)) return why('causal attention with Sq ≠ Sk is not fused');
  const mt = mask ? facts.get(mask) : undefined;
  if (mt && (mt.shape?.length ?? 5) > 4) return why('the mask rank is over 4');
  if (mt && mt.shape![mt.shape!.length - 1] !== undefined && !dimEq(mt.shape![mt.shape!.length - 1]!, sk)) return why('the mask is not as long as the keys');
  const out: Node[] = [];
  const toBHSD = (x: string): string => {
    if (qd.length === 4) return x;
    const shapeName = `${n.name}:${x}:heads`;
    out.push({ name: shapeName, op: 'Constant', domain: '', inputs: [], outputs: [shapeName], origin: n.origin, attrs: { value: { kind: 'tensor', value: Tensor.fromNumbers('int64', [4], [0, 0, heads, headSize]) } } });
    out.push({ name: `${shapeName}/split`, op: 'Reshape', domain: '', inputs: [x, shapeName], outputs: [`${shapeName}/split`], origin: n.origin, attrs: {} });
    out.push({ name: `${shapeName}/bhsd`, op: 'Transpose', domain: '', inputs: [`${shapeName}/split`], outputs: [`${shapeName}/bhsd`], origin: n.origin, attrs: { perm: { kind: 'ints', value: [0, 2, 1, 3] } } });
    return `${shapeName}/bhsd`;
  };
  const [k4, v4] = [toBHSD(k!), toBHSD(v!)];
  const scale = n.attrs.scale?.kind === 'float' ? n.attrs.scale.value : 1 / Math.sqrt(headSize);
  out.push(attentionNode(`${n.name}:fused`, n.origin, {
    q: q!, k: k4, v: v4, mask, heads, scale, layout: qd.length === 4 ? 0 : 1, out: n.outputs[0]!,
    maskKind: !mask ? MASK_KIND.NONE : mt!.dtype === 'bool' ? MASK_KIND.BOOL_KEEP : MASK_KIND.ADD,
  }, causal));
  return out;
}

function attentionNode(name: string, origin: string[], m: Pick<Match, 'q' | 'k' | 'v' | 'mask' | 'maskKind' | 'heads' | 'scale' | 'layout' | 'out'>, causal = 0): Node {
  return {
    name, op: 'Attention', domain: 'planc', inputs: [m.q, m.k, m.v, m.mask], outputs: [m.out], origin,
    attrs: {
      num_heads: { kind: 'int', value: m.heads }, scale: { kind: 'float', value: m.scale }, q_layout: { kind: 'int', value: m.layout },
      mask_kind: { kind: 'int', value: m.maskKind }, is_causal: { kind: 'int', value: causal },
    },
  };
}

function fuseGraph(g: Graph, model: Model, ctx: PassContext): number {
  const facts = inferGraph(model, g, { annotate: false }, new Diagnostics());
  const matcher = new Matcher(g, facts, (node, why) => ctx.explain?.(NAME, node, why));
  const rewrites = new Rewrites();
  g.nodes.forEach((n, i) => {
    if (rewrites.taken(i) || n.domain !== '') return;
    if (n.op === 'Attention') {
      const made = fromOnnxAttention(g, n, facts, (why) => ctx.explain?.(NAME, n.name, why));
      if (made) rewrites.replace([i], made);
      return;
    }
    if (n.op !== 'Softmax') return;
    const m = matcher.at(i);
    if (!m) return;
    const shapeNodes = [...new Set(m.shapeNodes)]; // Shape readers of the values the block removes
    const rebuilt = shapeNodes.map((k) => rebuildShape(g, g.nodes[k]!, matcher.shape(g.nodes[k]!.inputs[0]!)!, [m.q, m.kSource, m.v]));
    if (rebuilt.some((r) => !r)) return ctx.explain?.(NAME, n.name, 'a Shape of a fused value cannot be rebuilt from Q, K, V');
    if (shapeNodes.some((k) => rewrites.taken(k))) return;
    const origin = m.nodes.flatMap((k) => g.nodes[k]!.origin);
    if (!rewrites.replace(m.nodes, [...m.before, attentionNode(`${n.name}:attention`, origin, m)])) return;
    shapeNodes.forEach((k, j) => rewrites.replace([k], rebuilt[j]!));
  });
  return rewrites.apply(g);
}

export const FUSE_ATTENTION: Pass = fusionPass(NAME, 'QKᵀ·scale (+mask) → Softmax → ·V with head split/merge, or ONNX Attention  ⇒  planc.Attention', fuseGraph);
