// Marian encoder-decoder graphs (encoder, decoder_model, decoder_with_past) node for node as the PyTorch seq2seq export;
// post-norm (as es-en) by default, pre-norm (mBART / pre-norm Marian style) with preNorm.
import { attr, FLOAT, GraphBuilder, INT64, tensor, valueInfo, type IValueInfo } from './graph.ts';

export type Activation = 'relu' | 'gelu' | 'swish';

export interface MarianConfig {
  d: number;
  encoderLayers: number;
  decoderLayers: number;
  heads: number;
  ffn: number;
  vocab: number;
  maxPos: number;
  activation: Activation;
  /**
   * Pre-norm layers (config normalize_before): x + SubLayer(LN(x)) for each sub-layer, and a final LayerNorm after
   * the last encoder and the last decoder layer (m.enc.ln, m.dec.ln). Default post-norm: LN(x + SubLayer(x)).
   */
  preNorm?: boolean;
  /**
   * An HRT-contract model (docs/hrt.md, scripts/make-model/hrt.ts): HRT_SPECIALS input-only embedding rows after the
   * vocabulary ([BOS_2], [BOS_3], [MASK]), an untied output projection over the vocabulary, `position_ids` inputs on
   * both decoders and a fourth graph decoder_nat_model.onnx (no causal mask, decoder_attention_mask, no cache).
   */
  hrt?: boolean;
}

/** Input-only ids an HRT model appends after the vocabulary: [BOS_2], [BOS_3], [MASK]. */
export const HRT_SPECIALS = 3;
/** The Skip-CMLM graph's file (config.json hrt.nat_graph). */
export const HRT_NAT_FILE = 'decoder_nat_model.onnx';

/** How a model tensor is filled: seeded normal values, or the transpose of another 2-D tensor. */
export type TensorInit = { kind: 'normal'; mean: number; std: number } | { kind: 'transpose'; of: string };

export interface TensorSpec {
  key: string;
  dims: number[];
  init: TensorInit;
}

export interface GraphDef {
  file: string;
  inputs: IValueInfo[];
  outputs: IValueInfo[];
  builder: GraphBuilder;
  /** Initializers in graph order: [name in the graph, model tensor key]. */
  initializers: [string, string][];
}

export interface MarianModel {
  config: MarianConfig;
  /** Every distinct tensor, in module order (the order of named parameters in the graphs). */
  tensors: Map<string, TensorSpec>;
  graphs: GraphDef[];
}

const BIAS_STD = 0.02;
const perm0213 = () => attr.ints('perm', [0, 2, 1, 3]);
const axis0 = () => attr.int('axis', 0);
const sfx = (n: number) => (n ? `_${n}` : '');

export function checkConfig(c: MarianConfig): void {
  const ints: [string, number, number][] = [
    ['d', c.d, 2],
    ['encoder layers', c.encoderLayers, 1],
    ['decoder layers', c.decoderLayers, 1],
    ['heads', c.heads, 1],
    ['ffn', c.ffn, 1],
    ['vocab', c.vocab, 2],
    ['max-pos', c.maxPos, 2],
  ];
  for (const [name, v, min] of ints) {
    if (!Number.isInteger(v) || v < min) throw new Error(`${name} must be an integer ≥ ${min}, got ${v}`);
  }
  if (c.d % 2) throw new Error(`d must be even (sinusoidal positions), got ${c.d}`);
  if (c.d % c.heads) throw new Error(`d (${c.d}) must be divisible by heads (${c.heads})`);
  if (!['relu', 'gelu', 'swish'].includes(c.activation))
    throw new Error(`activation must be relu, gelu or swish, got ${c.activation}`);
}

/** Every tensor of the model, in PyTorch module order: out_bias, emb, encoder layers, decoder layers, tied projection. */
function tensorSpecs(c: MarianConfig): Map<string, TensorSpec> {
  const m = new Map<string, TensorSpec>();
  const normal = (key: string, dims: number[], mean: number, std: number) =>
    m.set(key, { key, dims, init: { kind: 'normal', mean, std } });
  const linear = (p: string, nIn: number, nOut: number) => {
    normal(`${p}.weight`, [nIn, nOut], 0, 1 / Math.sqrt(nIn)); // stored [in, out]: the export's MatMul(x, W^T)
  };
  const bias = (key: string, n: number) => normal(key, [n], 0, BIAS_STD);
  const ln = (p: string) => {
    normal(`${p}.weight`, [c.d], 1, BIAS_STD);
    normal(`${p}.bias`, [c.d], 0, BIAS_STD);
  };
  bias('m.out_bias', c.vocab);
  normal('m.emb.weight', [c.vocab + (c.hrt ? HRT_SPECIALS : 0), c.d], 0, 1 / Math.sqrt(c.d));
  const layerBiases = (p: string, atts: string[], lns: number) => {
    for (const a of atts) for (const x of ['q', 'k', 'v', 'o']) bias(`${p}.${a}.${x}.bias`, c.d);
    bias(`${p}.ffn.w1.bias`, c.ffn);
    bias(`${p}.ffn.w2.bias`, c.d);
    for (let j = 1; j <= lns; j++) ln(`${p}.ln${j}`);
  };
  const layerWeights = (p: string, atts: string[]) => {
    for (const a of atts) for (const x of ['q', 'k', 'v', 'o']) linear(`${p}.${a}.${x}`, c.d, c.d);
    linear(`${p}.ffn.w1`, c.d, c.ffn);
    linear(`${p}.ffn.w2`, c.ffn, c.d);
  };
  // Pre-norm's final norms follow the layers of their stack (added only then: post-norm's tensors stay as they were).
  for (let i = 0; i < c.encoderLayers; i++) layerBiases(`m.enc.${i}`, ['att'], 2);
  if (c.preNorm) ln('m.enc.ln');
  for (let i = 0; i < c.decoderLayers; i++) layerBiases(`m.dec.${i}`, ['self_att', 'cross_att'], 3);
  if (c.preNorm) ln('m.dec.ln');
  for (let i = 0; i < c.encoderLayers; i++) layerWeights(`m.enc.${i}`, ['att']);
  for (let i = 0; i < c.decoderLayers; i++) layerWeights(`m.dec.${i}`, ['self_att', 'cross_att']);
  if (c.hrt)
    normal('m.emb.weight.T', [c.d, c.vocab], 0, 1 / Math.sqrt(c.d)); // untied: the embedding has more rows
  else
    m.set('m.emb.weight.T', {
      key: 'm.emb.weight.T',
      dims: [c.d, c.vocab],
      init: { kind: 'transpose', of: 'm.emb.weight' },
    });
  return m;
}

/** Marian sinusoidal table [maxPos, d]: first half sin, second half cos, timescales 10000^(-k/(d/2-1)). */
export function positionTable(maxPos: number, d: number): Float32Array {
  const half = d / 2;
  const inc = half > 1 ? Math.log(10000) / (half - 1) : 0;
  const out = new Float32Array(maxPos * d);
  for (let p = 0; p < maxPos; p++) {
    for (let k = 0; k < half; k++) {
      const a = p * Math.exp(-k * inc);
      out[p * d + k] = Math.sin(a);
      out[p * d + half + k] = Math.cos(a);
    }
  }
  return out;
}

/** Shared pieces of the three graphs. */
class Parts {
  readonly dh: number;
  constructor(
    readonly c: MarianConfig,
    readonly g: GraphBuilder,
    readonly pos: Float32Array,
  ) {
    this.dh = c.d / c.heads;
  }

  /** x @ W + b in module scope `scope` (Add has the bias first, as exported). */
  linear(scope: string, x: string, p: string): string {
    const mm = this.g.add(scope, 'MatMul', [x, this.g.weight(`${p}.weight`)]);
    return this.g.add(scope, 'Add', [this.g.param(`${p}.bias`), mm]);
  }

  /** [b, s, d] → [b, s, H, dh] via Shape→Gather→Unsqueeze→Concat→Reshape. */
  splitHeads(scope: string, x: string): string {
    const g = this.g;
    const s0 = g.add(scope, 'Shape', [x]);
    const b = g.add(scope, 'Gather', [s0, g.constant(scope, tensor.i64(0))], [axis0()]);
    const s1 = g.add(scope, 'Shape', [x]);
    const t = g.add(scope, 'Gather', [s1, g.constant(scope, tensor.i64(1))], [axis0()]);
    const ub = g.add(scope, 'Unsqueeze', [b, g.unsqueezeAxes0()]);
    const ut = g.add(scope, 'Unsqueeze', [t, g.unsqueezeAxes0()]);
    const h = g.constant(scope, tensor.i64v([this.c.heads]));
    const dh = g.constant(scope, tensor.i64v([this.dh]));
    const shape = g.add(scope, 'Concat', [ub, ut, h, dh], [axis0()]);
    return g.add(scope, 'Reshape', [x, shape], [attr.int('allowzero', 0)]);
  }

  /** [b, H, s, dh] → [b, s, H*dh]. */
  mergeHeads(scope: string, ctx: string): string {
    const g = this.g;
    const dim = (i: number) =>
      g.add(scope, 'Gather', [g.add(scope, 'Shape', [ctx]), g.constant(scope, tensor.i64(i))], [axis0()]);
    const [b, h, s, dh] = [dim(0), dim(1), dim(2), dim(3)];
    const tr = g.add(scope, 'Transpose', [ctx], [perm0213()]);
    const hd = g.add(scope, 'Mul', [h, dh]);
    const ub = g.add(scope, 'Unsqueeze', [b, g.unsqueezeAxes0()]);
    const us = g.add(scope, 'Unsqueeze', [s, g.unsqueezeAxes0()]);
    const uhd = g.add(scope, 'Unsqueeze', [hd, g.unsqueezeAxes0()]);
    const shape = g.add(scope, 'Concat', [ub, us, uhd], [axis0()]);
    return g.add(scope, 'Reshape', [tr, shape], [attr.int('allowzero', 0)]);
  }

  /** q [b, s, d] → transposed [b, H, s, dh] scaled by 1/sqrt(dh). */
  query(scope: string, q: string): string {
    const g = this.g;
    const t = g.add(scope, 'Transpose', [this.splitHeads(scope, q)], [perm0213()]);
    return g.add(scope, 'Mul', [t, g.constant(scope, tensor.f32(1 / Math.sqrt(this.dh)))]);
  }

  /** softmax(q k^T + mask) v, then heads merged. */
  attend(scope: string, q: string, kT: string, mask: string | undefined, v: string): string {
    const g = this.g;
    let scores = g.add(scope, 'MatMul', [q, kT]);
    if (mask) scores = g.add(scope, 'Add', [scores, mask]);
    const p = g.add(scope, 'Softmax', [scores], [attr.int('axis', -1)]);
    return this.mergeHeads(scope, g.add(scope, 'MatMul', [p, v]));
  }

  /** (1 - mask) * -1e9 as [b, 1, 1, s]. */
  paddingMask(input: string): string {
    const g = this.g;
    const cast = g.add('', 'Cast', [input], [attr.int('to', FLOAT)]);
    const sub = g.add('', 'Sub', [g.constant('', tensor.f32(1)), cast]);
    const mul = g.add('', 'Mul', [sub, g.constant('', tensor.f32(-1e9))]);
    const u1 = g.add('', 'Unsqueeze', [mul, g.constant('', tensor.i64v([1]))]);
    return g.add('', 'Unsqueeze', [u1, g.constant('', tensor.i64v([2]))]);
  }

  /** Gathered embeddings × sqrt(d) (the position add comes separately). */
  embed(): string {
    const g = this.g;
    const e = g.add('/emb', 'Gather', [g.param('m.emb.weight'), 'input_ids']);
    return g.add('', 'Mul', [e, g.constant('', tensor.f32(Math.sqrt(this.c.d)))]);
  }

  /** The position embeddings of the `position_ids` input ([b, t] → [b, t, d]): rows of the sinusoidal table. */
  gatherPositions(): string {
    return this.g.add('', 'Gather', [this.positionTable(), 'position_ids'], [axis0()]);
  }

  positionTable(): string {
    return this.g.constant('', tensor.f32nd([this.c.maxPos, this.c.d], this.pos));
  }

  /** Slice(table, starts, ends, [0], [1]) unsqueezed to [1, s, d]. */
  slicePositions(table: string, starts: string, ends: string): string {
    const g = this.g;
    const sl = g.add('', 'Slice', [
      table,
      starts,
      ends,
      g.constant('', tensor.i64v([0])),
      g.constant('', tensor.i64v([1])),
    ]);
    return g.add('', 'Unsqueeze', [sl, g.constant('', tensor.i64v([0]))]);
  }

  layerNorm(scope: string, x: string, p: string, output?: string): string {
    const g = this.g;
    return g.add(
      scope,
      'LayerNormalization',
      [x, g.param(`${p}.weight`), g.param(`${p}.bias`)],
      [attr.int('axis', -1), attr.float('epsilon', 1e-5)],
      output,
    );
  }

  /** The input a sub-layer reads: LN(x) in pre-norm (norm `ln` of layer `p`), x itself in post-norm. */
  subIn(scope: string, x: string, p: string, ln: string): string {
    return this.c.preNorm ? this.layerNorm(`${scope}/${ln}`, x, `${p}.${ln}`) : x;
  }

  /** The residual after a sub-layer with output y: x + y in pre-norm, LN(x + y) in post-norm. */
  residual(scope: string, x: string, y: string, p: string, ln: string, output?: string): string {
    const sum = this.g.add(scope, 'Add', [x, y], [], this.c.preNorm ? output : undefined);
    return this.c.preNorm ? sum : this.layerNorm(`${scope}/${ln}`, sum, `${p}.${ln}`, output);
  }

  /** FFN block: post-norm ln(x + w2(act(w1(x)))), pre-norm x + w2(act(w1(ln(x)))). */
  ffnBlock(scope: string, x: string, p: string, ln: string, output?: string): string {
    const h = this.linear(`${scope}/ffn/w1`, this.subIn(scope, x, p, ln), `${p}.ffn.w1`);
    const a = this.activation(`${scope}/ffn`, h);
    const f = this.linear(`${scope}/ffn/w2`, a, `${p}.ffn.w2`);
    return this.residual(scope, x, f, p, ln, output);
  }

  /** Pre-norm's final norm of a stack (`m.enc.ln` / `m.dec.ln`); post-norm returns x as it is. */
  finalNorm(scope: string, x: string, p: string, output?: string): string {
    return this.c.preNorm ? this.layerNorm(`${scope}/ln`, x, `${p}.ln`, output) : x;
  }

  activation(scope: string, x: string): string {
    const g = this.g;
    switch (this.c.activation) {
      case 'relu':
        return g.add(scope, 'Relu', [x]);
      case 'gelu': {
        // torch's exact GELU export: x * 0.5 * (1 + erf(x / sqrt 2))
        const div = g.add(scope, 'Div', [x, g.constant(scope, tensor.f32(Math.SQRT2))]);
        const erf = g.add(scope, 'Erf', [div]);
        const add = g.add(scope, 'Add', [erf, g.constant(scope, tensor.f32(1))]);
        const mul = g.add(scope, 'Mul', [x, add]);
        return g.add(scope, 'Mul', [mul, g.constant(scope, tensor.f32(0.5))]);
      }
      case 'swish':
        return g.add(scope, 'Mul', [x, g.add(scope, 'Sigmoid', [x])]);
    }
  }

  /** Tied output projection (transposed copy of the embedding) + final_logits_bias. */
  logits(x: string): string {
    const g = this.g;
    const mm = g.add('', 'MatMul', [x, g.weight('m.emb.weight.T')]);
    return g.add('', 'Add', [g.param('m.out_bias'), mm], [], 'logits');
  }
}

function encoderGraph(c: MarianConfig, pos: Float32Array): GraphBuilder {
  const g = new GraphBuilder(150);
  const P = new Parts(c, g, pos);
  const mask = P.paddingMask('attention_mask');
  const len = g.add('', 'Gather', [g.add('', 'Shape', ['input_ids']), g.constant('', tensor.i64(1))], [axis0()]);
  const emb = P.embed();
  const table = P.positionTable();
  const starts = g.constant('', tensor.i64v([0]));
  const ends = g.add('', 'Unsqueeze', [len, g.constant('', tensor.i64v([0]))]);
  let x = g.add('', 'Add', [emb, P.slicePositions(table, starts, ends)]);
  for (let i = 0; i < c.encoderLayers; i++) {
    const S = `/enc.${i}`;
    const p = `m.enc.${i}`;
    const a = P.subIn(S, x, p, 'ln1');
    const k = P.splitHeads(S, P.linear(`${S}/k`, a, `${p}.att.k`));
    const v = g.add(S, 'Transpose', [P.splitHeads(S, P.linear(`${S}/v`, a, `${p}.att.v`))], [perm0213()]);
    const q = P.query(S, P.linear(`${S}/q`, a, `${p}.att.q`));
    const kT = g.add(S, 'Transpose', [k], [attr.ints('perm', [0, 2, 3, 1])]);
    const ctx = P.attend(S, q, kT, mask, v);
    const o = P.linear(`${S}/o`, ctx, `${p}.att.o`);
    const h = P.residual(S, x, o, p, 'ln1');
    x = P.ffnBlock(S, h, p, 'ln2', i === c.encoderLayers - 1 && !c.preNorm ? 'last_hidden_state' : undefined);
  }
  P.finalNorm('/enc', x, 'm.enc', 'last_hidden_state');
  return g;
}

/** decoder_model (causal, with presents) or, `nat`, HRT's decoder_nat_model (decoder_attention_mask keys, no cache out). */
function decoderGraph(c: MarianConfig, pos: Float32Array, nat = false): GraphBuilder {
  const g = new GraphBuilder(150);
  const P = new Parts(c, g, pos);
  const one = nat ? '' : g.constant('', tensor.i64(1)); // node order as the export's (the causal mask's constant first)
  const len = g.add('', 'Gather', [g.add('', 'Shape', ['input_ids']), g.constant('', tensor.i64(1))], [axis0()]);
  let causal: string;
  if (nat) {
    causal = P.paddingMask('decoder_attention_mask');
  } else {
    // Causal mask: triu(full([t, t], -1e9), 1) as [1, 1, t, t].
    const u0 = g.add('', 'Unsqueeze', [len, g.unsqueezeAxes0()]);
    const u1 = g.add('', 'Unsqueeze', [len, g.unsqueezeAxes0()]);
    const full = g.add(
      '',
      'ConstantOfShape',
      [g.add('', 'Concat', [u0, u1], [axis0()])],
      [attr.tensor('value', tensor.f32v([-1e9]))],
    );
    const tri = g.add('', 'Trilu', [full, one], [attr.int('upper', 1)]);
    causal = g.add('', 'Unsqueeze', [
      g.add('', 'Unsqueeze', [tri, g.constant('', tensor.i64v([0]))]),
      g.constant('', tensor.i64v([1])),
    ]);
  }
  const encMask = P.paddingMask('encoder_attention_mask');
  const emb = P.embed();
  let x: string;
  if (c.hrt) {
    x = g.add('', 'Add', [emb, P.gatherPositions()]);
  } else {
    const table = P.positionTable();
    const starts = g.constant('', tensor.i64v([0]));
    const ends = g.add('', 'Unsqueeze', [len, g.constant('', tensor.i64v([0]))]);
    x = g.add('', 'Add', [emb, P.slicePositions(table, starts, ends)]);
  }
  for (let i = 0; i < c.decoderLayers; i++) {
    const S = `/dec.${i}`;
    const p = `m.dec.${i}`;
    // Cache projections run in the root scope, module calls numbered k, k_1, k_2, … as traced.
    const a = P.subIn(S, x, p, 'ln1');
    const present = (name: string) => (nat ? undefined : name);
    const kSelf = P.splitHeads('', P.linear(`/k${sfx(2 * i)}`, a, `${p}.self_att.k`));
    if (!nat) g.add('', 'Transpose', [kSelf], [perm0213()], `present.${i}.decoder.key`);
    const vSelf = g.add(
      '',
      'Transpose',
      [P.splitHeads('', P.linear(`/v${sfx(2 * i)}`, a, `${p}.self_att.v`))],
      [perm0213()],
      present(`present.${i}.decoder.value`),
    );
    const kCross = P.splitHeads('', P.linear(`/k${sfx(2 * i + 1)}`, 'encoder_hidden_states', `${p}.cross_att.k`));
    if (!nat) g.add('', 'Transpose', [kCross], [perm0213()], `present.${i}.encoder.key`);
    const vCross = g.add(
      '',
      'Transpose',
      [P.splitHeads('', P.linear(`/v${sfx(2 * i + 1)}`, 'encoder_hidden_states', `${p}.cross_att.v`))],
      [perm0213()],
      present(`present.${i}.encoder.value`),
    );

    const q = P.query(S, P.linear(`${S}/q`, a, `${p}.self_att.q`));
    const kT = g.add(S, 'Transpose', [kSelf], [attr.ints('perm', [0, 2, 3, 1])]);
    const ctx = P.attend(S, q, kT, causal, vSelf);
    const h1 = P.residual(S, x, P.linear(`${S}/o`, ctx, `${p}.self_att.o`), p, 'ln1');
    const q2 = P.query(S, P.linear(`${S}/q_1`, P.subIn(S, h1, p, 'ln2'), `${p}.cross_att.q`));
    const kT2 = g.add(S, 'Transpose', [kCross], [attr.ints('perm', [0, 2, 3, 1])]);
    const ctx2 = P.attend(S, q2, kT2, encMask, vCross);
    const h2 = P.residual(S, h1, P.linear(`${S}/o_1`, ctx2, `${p}.cross_att.o`), p, 'ln2');
    x = P.ffnBlock(S, h2, p, 'ln3');
  }
  P.logits(P.finalNorm('/dec', x, 'm.dec'));
  return g;
}

function decoderWithPastGraph(c: MarianConfig, pos: Float32Array): GraphBuilder {
  const g = new GraphBuilder(150);
  const P = new Parts(c, g, pos);
  // positions from the past length (ordinary) or the position_ids input (hrt: no past length read)
  const past = c.hrt
    ? ''
    : g.add(
        '',
        'Gather',
        [g.add('', 'Shape', ['past_key_values.0.decoder.key']), g.constant('', tensor.i64(2))],
        [axis0()],
      );
  const encMask = P.paddingMask('encoder_attention_mask');
  const len = c.hrt
    ? ''
    : g.add('', 'Gather', [g.add('', 'Shape', ['input_ids']), g.constant('', tensor.i64(1))], [axis0()]);
  const emb = P.embed();
  let x: string;
  if (c.hrt) {
    x = g.add('', 'Add', [emb, P.gatherPositions()]);
  } else {
    const end = g.add('', 'Add', [past, len]);
    const table = P.positionTable();
    const starts = g.add('', 'Unsqueeze', [past, g.constant('', tensor.i64v([0]))]);
    const ends = g.add('', 'Unsqueeze', [end, g.constant('', tensor.i64v([0]))]);
    x = g.add('', 'Add', [emb, P.slicePositions(table, starts, ends)]);
  }
  const perm0132 = () => attr.ints('perm', [0, 1, 3, 2]);
  for (let i = 0; i < c.decoderLayers; i++) {
    const S = `/dec.${i}`;
    const p = `m.dec.${i}`;
    const a = P.subIn(S, x, p, 'ln1');
    const kNew = g.add(
      '',
      'Transpose',
      [P.splitHeads('', P.linear(`/k${sfx(i)}`, a, `${p}.self_att.k`))],
      [perm0213()],
    );
    const vNew = g.add(
      '',
      'Transpose',
      [P.splitHeads('', P.linear(`/v${sfx(i)}`, a, `${p}.self_att.v`))],
      [perm0213()],
    );
    const k = g.add(
      '',
      'Concat',
      [`past_key_values.${i}.decoder.key`, kNew],
      [attr.int('axis', 2)],
      `present.${i}.decoder.key`,
    );
    const v = g.add(
      '',
      'Concat',
      [`past_key_values.${i}.decoder.value`, vNew],
      [attr.int('axis', 2)],
      `present.${i}.decoder.value`,
    );

    const q = P.query(S, P.linear(`${S}/q`, a, `${p}.self_att.q`));
    const ctx = P.attend(S, q, g.add(S, 'Transpose', [k], [perm0132()]), undefined, v);
    const h1 = P.residual(S, x, P.linear(`${S}/o`, ctx, `${p}.self_att.o`), p, 'ln1');
    const q2 = P.query(S, P.linear(`${S}/q_1`, P.subIn(S, h1, p, 'ln2'), `${p}.cross_att.q`));
    const kT2 = g.add(S, 'Transpose', [`past_key_values.${i}.encoder.key`], [perm0132()]);
    const ctx2 = P.attend(S, q2, kT2, encMask, `past_key_values.${i}.encoder.value`);
    const h2 = P.residual(S, h1, P.linear(`${S}/o_1`, ctx2, `${p}.cross_att.o`), p, 'ln2');
    x = P.ffnBlock(S, h2, p, 'ln3');
  }
  P.logits(P.finalNorm('/dec', x, 'm.dec'));
  return g;
}

/** Orders a graph's initializers as the export does: named parameters in module order, then MatMul weights in use order. */
function initializers(g: GraphBuilder, order: Map<string, number>): [string, string][] {
  const named = [...g.params.entries()].sort((a, b) => order.get(a[1])! - order.get(b[1])!);
  return [...named, ...g.weights.entries()];
}

/** Builds the three graphs and the tensor table (no weight data). */
export function buildMarian(c: MarianConfig): MarianModel {
  checkConfig(c);
  const tensors = tensorSpecs(c);
  const order = new Map([...tensors.keys()].map((k, i) => [k, i]));
  const pos = positionTable(c.maxPos, c.d);
  const { d, heads, vocab } = c;
  const dh = d / heads;
  const ids = (len: string | number) => valueInfo('input_ids', INT64, ['batch_size', len]);
  const encMask = (name: string) => valueInfo(name, INT64, ['batch_size', 'encoder_sequence_length']);
  const kv = (name: string, len: string) => valueInfo(name, FLOAT, ['batch_size', heads, len, dh]);

  const enc = encoderGraph(c, pos);
  const dec = decoderGraph(c, pos);
  const dwp = decoderWithPastGraph(c, pos);
  const decOut: IValueInfo[] = [valueInfo('logits', FLOAT, ['batch_size', 'decoder_sequence_length', vocab])];
  const positions = (len: string | number) => (c.hrt ? [valueInfo('position_ids', INT64, ['batch_size', len])] : []);
  const dwpIn: IValueInfo[] = [ids(1), ...positions(1), encMask('encoder_attention_mask')];
  const dwpOut: IValueInfo[] = [valueInfo('logits', FLOAT, ['batch_size', 1, vocab])];
  for (let i = 0; i < c.decoderLayers; i++) {
    for (const kind of ['key', 'value']) decOut.push(kv(`present.${i}.decoder.${kind}`, 'decoder_sequence_length'));
    for (const kind of ['key', 'value']) decOut.push(kv(`present.${i}.encoder.${kind}`, 'encoder_sequence_length'));
    for (const kind of ['key', 'value'])
      dwpIn.push(kv(`past_key_values.${i}.decoder.${kind}`, 'past_decoder_sequence_length'));
    for (const kind of ['key', 'value'])
      dwpIn.push(kv(`past_key_values.${i}.encoder.${kind}`, 'encoder_sequence_length'));
    for (const kind of ['key', 'value'])
      dwpOut.push(kv(`present.${i}.decoder.${kind}`, 'past_decoder_sequence_length + 1'));
  }
  const graphs: GraphDef[] = [
    {
      file: 'encoder_model.onnx',
      builder: enc,
      initializers: initializers(enc, order),
      inputs: [ids('encoder_sequence_length'), encMask('attention_mask')],
      outputs: [valueInfo('last_hidden_state', FLOAT, ['batch_size', 'encoder_sequence_length', d])],
    },
    {
      file: 'decoder_model.onnx',
      builder: dec,
      initializers: initializers(dec, order),
      inputs: [
        ids('decoder_sequence_length'),
        ...positions('decoder_sequence_length'),
        encMask('encoder_attention_mask'),
        valueInfo('encoder_hidden_states', FLOAT, ['batch_size', 'encoder_sequence_length', d]),
      ],
      outputs: decOut,
    },
    {
      file: 'decoder_with_past_model.onnx',
      builder: dwp,
      initializers: initializers(dwp, order),
      inputs: dwpIn,
      outputs: dwpOut,
    },
  ];
  if (c.hrt) {
    const nat = decoderGraph(c, pos, true);
    graphs.push({
      file: HRT_NAT_FILE,
      builder: nat,
      initializers: initializers(nat, order),
      inputs: [
        ids('decoder_sequence_length'),
        ...positions('decoder_sequence_length'),
        valueInfo('decoder_attention_mask', INT64, ['batch_size', 'decoder_sequence_length']),
        encMask('encoder_attention_mask'),
        valueInfo('encoder_hidden_states', FLOAT, ['batch_size', 'encoder_sequence_length', d]),
      ],
      outputs: [decOut[0]!],
    });
  }
  return { config: c, tensors, graphs };
}
