// Names the weights of an imported Marian/BART-family seq2seq export with Hugging Face state-dict names, by graph structure.
import type { Graph, Model } from '../../compiler/ir.ts';
import { Tensor } from '../../compiler/tensor.ts';

/** The config.json facts the mapping reads. */
export interface HfConfig {
  model_type: string;
  d_model: number;
  vocab_size: number;
  encoder_layers: number;
  decoder_layers: number;
  max_position_embeddings?: number;
  tie_word_embeddings?: boolean;
}

/** The families this mapping knows, with the modules beyond Marian's that each one has. */
const FAMILIES: Record<string, { layernormEmbedding: boolean; finalLayerNorm: boolean }> = {
  marian: { layernormEmbedding: false, finalLayerNorm: false },
  bart: { layernormEmbedding: true, finalLayerNorm: false },
  mbart: { layernormEmbedding: true, finalLayerNorm: true },
};

/** Every tensor a Hugging Face checkpoint of this config holds, in state-dict order. */
export function expectedNames(c: HfConfig): string[] {
  const f = FAMILIES[c.model_type];
  if (!f)
    throw new Error(
      `model_type '${c.model_type}' is not a Marian/BART-family model (this mapping knows ${Object.keys(FAMILIES).join(', ')})`,
    );
  const lin = (p: string) => [`${p}.weight`, `${p}.bias`];
  const attn = (p: string) => ['q_proj', 'k_proj', 'v_proj', 'out_proj'].flatMap((m) => lin(`${p}.${m}`));
  const out = ['model.shared.weight'];
  for (const side of ['encoder', 'decoder'] as const) {
    const s = `model.${side}`;
    out.push(`${s}.embed_positions.weight`);
    if (f.layernormEmbedding) out.push(...lin(`${s}.layernorm_embedding`));
    const n = side === 'encoder' ? c.encoder_layers : c.decoder_layers;
    for (let i = 0; i < n; i++) {
      const l = `${s}.layers.${i}`;
      out.push(...attn(`${l}.self_attn`), ...lin(`${l}.self_attn_layer_norm`));
      if (side === 'decoder') out.push(...attn(`${l}.encoder_attn`), ...lin(`${l}.encoder_attn_layer_norm`));
      out.push(...lin(`${l}.fc1`), ...lin(`${l}.fc2`), ...lin(`${l}.final_layer_norm`));
    }
    if (f.finalLayerNorm) out.push(...lin(`${s}.layer_norm`));
  }
  out.push('lm_head.weight', 'final_logits_bias');
  return out;
}

/** The short module names of planc's es-en export (m.enc.0.att.q, m.dec.1.cross_att.k, m.dec.0.ln3, ...) in HF's words. */
function alias(segs: string[], side: 'encoder' | 'decoder'): string[] {
  const out: string[] = [];
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i]!;
    const next = segs[i + 1];
    if ((s === 'enc' || s === 'dec') && next !== undefined && /^\d+$/.test(next)) {
      out.push('model', s === 'enc' ? 'encoder' : 'decoder', 'layers', next);
      i++;
    } else if (s === 'att' || s === 'self_att') out.push('self_attn');
    else if (s === 'cross_att') out.push('encoder_attn');
    else if (s === 'q' || s === 'k' || s === 'v') out.push(`${s}_proj`);
    else if (s === 'o') out.push('out_proj');
    else if (s === 'ffn' && (next === 'w1' || next === 'w2')) {
      out.push(next === 'w1' ? 'fc1' : 'fc2');
      i++;
    } else if (s === 'ln1') out.push('self_attn_layer_norm');
    else if (s === 'ln2') out.push(side === 'decoder' ? 'encoder_attn_layer_norm' : 'final_layer_norm');
    else if (s === 'ln3') out.push('final_layer_norm');
    else if (s === 'emb' || s === 'embed_tokens' || s === 'shared') return ['model', 'shared'];
    else if (s === 'out_bias') return ['final_logits_bias'];
    else out.push(s);
  }
  return out;
}

/** A module path (`/model/decoder/layers.0/fc1/MatMul`, `m.enc.0.att.q.bias`) as an HF module name for one graph side. */
export function hfModule(raw: string, side: 'encoder' | 'decoder', dropLast: boolean): string {
  let segs = raw
    .replace(/^\//, '')
    .split(/[/.]/)
    .filter((s) => s !== '');
  if (dropLast) segs = segs.slice(0, -1);
  if (segs[0] === 'm') segs = segs.slice(1);
  segs = alias(segs, side);
  if (segs[0] === 'model' && (segs[1] === 'shared' || segs[1] === 'encoder' || segs[1] === 'decoder'))
    return segs.join('.');
  if (segs[0] === 'lm_head' || segs[0] === 'final_logits_bias') return segs.join('.');
  if (segs[0] === 'encoder' || segs[0] === 'decoder') return ['model', ...segs].join('.');
  // optimum's encoder graph is the encoder module alone: its paths start at layers.N / embed_positions
  return ['model', side, ...segs].join('.');
}

/** One named tensor of the checkpoint and the ONNX value it came from. */
export interface Named {
  tensor: Tensor;
  from: string;
}

/** [rows, cols] float32 → its transpose (MatMul weights are stored [in, out]; nn.Linear holds [out, in]). */
function transpose(t: Tensor): Tensor {
  const [r, c] = t.dims as [number, number];
  const a = t.nums as Float32Array;
  const o = new Float32Array(r * c);
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) o[j * r + i] = a[i * c + j]!;
  return Tensor.fromNumbers('float32', [c, r], o);
}

/**
 * Finds each HF tensor in the graphs: a MatMul's weight (transposed) is named after the module in its node's path, or
 * after the bias its output is added to (optimum's anonymous `onnx::MatMul_N` weights); the bias of that Add is the
 * module's bias; LayerNormalization's scale and bias its weight and bias; a Gather's table an embedding; a constant
 * [positions, d_model] table that the graph slices (a fixed sinusoidal table, whichever frequencies it was made with)
 * the side's embed_positions. Values are followed through Identity nodes (the exporter's deduplicated initializers).
 * Throws naming the first tensor it cannot find.
 */
export function hfStateDict(model: Model, c: HfConfig): { tensors: Map<string, Named>; notes: string[] } {
  const expected = expectedNames(c);
  const want = new Set(expected);
  const found = new Map<string, Named>();
  const notes: string[] = [];
  const put = (name: string, t: Tensor, from: string) => {
    if (!want.has(name)) return false;
    const prev = found.get(name);
    if (prev && prev.tensor.dims.join() !== t.dims.join())
      throw new Error(`${name}: ${from} [${t.dims}] disagrees with ${prev.from} [${prev.tensor.dims}]`);
    if (!prev) found.set(name, { tensor: t, from });
    return true;
  };
  for (const [gname, g] of model.graphs) {
    if (!['encoder', 'decoder', 'decoder_with_past'].includes(gname)) continue;
    visit(model, g, gname === 'encoder' ? 'encoder' : 'decoder', c, put);
  }
  // a tied projection that the graph holds only as the transposed embedding
  if (!found.has('lm_head.weight') && found.has('model.shared.weight') && c.tie_word_embeddings !== false)
    found.set('lm_head.weight', found.get('model.shared.weight')!);
  if (!found.has('final_logits_bias')) {
    found.set('final_logits_bias', { tensor: Tensor.zeros('float32', [1, c.vocab_size]), from: '(absent: zeros)' });
    notes.push('final_logits_bias: no bias after the output projection; written as zeros');
  }
  const fb = found.get('final_logits_bias')!;
  if (fb.tensor.rank === 1) found.set('final_logits_bias', { ...fb, tensor: fb.tensor.reshape([1, fb.tensor.size]) });
  const lm = found.get('lm_head.weight');
  const sh = found.get('model.shared.weight');
  if (lm && sh && c.tie_word_embeddings !== false && lm.tensor !== sh.tensor && !sameNums(lm.tensor, sh.tensor))
    throw new Error(
      'the output projection is not the embedding transposed, but config.json ties them (set tie_word_embeddings: false)',
    );
  const missing = expected.filter((n) => !found.has(n));
  if (missing.length > 0)
    throw new Error(
      `no tensor in the ONNX graphs maps to ${missing[0]} (${missing.length} missing in all${missing.length > 1 ? `: ${missing.slice(0, 6).join(', ')}${missing.length > 6 ? ', ...' : ''}` : ''}): this export does not fit the ${c.model_type} layout`,
    );
  return { tensors: new Map(expected.map((n) => [n, found.get(n)!])), notes };
}

function sameNums(a: Tensor, b: Tensor): boolean {
  if (a.dims.join() !== b.dims.join()) return false;
  const x = a.nums;
  const y = b.nums;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** The mapping over one graph (see hfStateDict). */
function visit(
  model: Model,
  g: Graph,
  side: 'encoder' | 'decoder',
  c: HfConfig,
  put: (name: string, t: Tensor, from: string) => boolean,
): void {
  const producer = new Map(g.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  const consumers = new Map<string, typeof g.nodes>();
  for (const n of g.nodes) for (const i of n.inputs) consumers.set(i, [...(consumers.get(i) ?? []), n]);
  /** The weight behind a value (through Identity), or undefined. */
  const weight = (v: string): Tensor | undefined => {
    for (let k = 0; k < 8; k++) {
      const id = g.initializers.get(v);
      if (id) return model.weights.get(id)?.tensor;
      const p = producer.get(v);
      if (p?.op !== 'Identity') return undefined;
      v = p.inputs[0]!;
    }
    return undefined;
  };
  const isLogits = (v: string) => g.outputs[0] === v || v === 'logits';
  for (const n of g.nodes) {
    if (n.op === 'MatMul') {
      const w = weight(n.inputs[1]!);
      if (w?.rank !== 2 || w.dtype !== 'float32') continue;
      const add = (consumers.get(n.outputs[0]!) ?? []).find((a) => a.op === 'Add');
      const biasIn = add?.inputs.find((i) => i !== n.outputs[0]);
      const bias = biasIn !== undefined ? weight(biasIn) : undefined;
      // the output projection: its product (plus the logits bias) is the graph's logits, or it maps d_model to the vocabulary
      const logits =
        isLogits(n.outputs[0]!) ||
        (add !== undefined && isLogits(add.outputs[0]!)) ||
        (w.dims[0] === c.d_model && w.dims[1] === c.vocab_size);
      const candidates = logits
        ? ['lm_head']
        : [hfModule(n.name, side, true), ...(bias && biasIn ? [hfModule(biasIn, side, true)] : [])];
      for (const m of candidates) {
        if (!put(`${m}.weight`, transpose(w), n.inputs[1]!)) continue;
        if (bias) put(m === 'lm_head' ? 'final_logits_bias' : `${m}.bias`, bias, biasIn!);
        break;
      }
    } else if (n.op === 'LayerNormalization') {
      const s = weight(n.inputs[1]!);
      const b = n.inputs[2] ? weight(n.inputs[2]) : undefined;
      if (!s) continue;
      for (const m of [hfModule(n.name, side, true), hfModule(n.inputs[1]!, side, true)]) {
        if (!put(`${m}.weight`, s, n.inputs[1]!)) continue;
        if (b) put(`${m}.bias`, b, n.inputs[2]!);
        break;
      }
    } else if (n.op === 'Constant' && n.attrs.value?.kind === 'tensor') {
      // a fixed position table held as a Constant, sliced to the sequence's positions
      const t = n.attrs.value.value;
      const sliced = (consumers.get(n.outputs[0]!) ?? []).some((u) => u.op === 'Slice' || u.op === 'Gather');
      if (t.rank === 2 && t.dtype === 'float32' && t.dims[1] === c.d_model && sliced)
        put(`model.${side}.embed_positions.weight`, t, n.name);
    } else if (n.op === 'Slice') {
      // the same table stored as an initializer
      const t = weight(n.inputs[0]!);
      if (t && t.rank === 2 && t.dtype === 'float32' && t.dims[1] === c.d_model)
        put(`model.${side}.embed_positions.weight`, t, n.inputs[0]!);
    } else if (n.op === 'Gather') {
      const t = weight(n.inputs[0]!);
      if (t?.rank !== 2) continue;
      for (const m of [hfModule(n.name, side, true), hfModule(n.inputs[0]!, side, true)])
        if (put(`${m}.weight`, t, n.inputs[0]!)) break;
    }
  }
}
