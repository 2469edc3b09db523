// Reference HRT decoding (docs/hrt.md section 3) over any graph runner — onnxruntime for the oracle — one sentence at a
// time: stage I is the existing reference greedy (test/reference/greedy.ts) or beam search (test/reference/beam.ts,
// generate()'s rules) with start token [BOS_k] and position_ids s·k injected into the decoder feeds; stage II is one
// decoder_nat_model call over the b_nat best stage-I hypotheses; the final choice is paper eq. 2.
// The oracle of planc's --strategy hrt (test/hrt-decode.test.ts); its decoding contract on a scripted model: test/hrt-contract.test.ts.
import { Tensor } from '../../compiler/tensor.ts';
import type { Conventions } from '../../runtime/decode/conventions.ts';
import { beamDecodeOne } from './beam.ts';
import { greedyDecode, type GraphRunner } from './greedy.ts';
import { logSoftmax } from './log-softmax.ts';

/** config.json's `hrt` object (contract version 1). */
export interface HrtConfig {
  version: number;
  chunk_sizes: number[];
  bos_k_ids: Record<string, number>;
  mask_id: number;
  input_vocab_size: number;
  nat_graph: string;
}

export interface HrtOptions extends Conventions {
  /** Chunk size; 1 = plain AT with the HRT model (start 0, positions 0, 1, 2, …, no stage II). */
  k: number;
  hrt: HrtConfig;
  /** The ordinary cap on target tokens, eos included; stage I runs at most ceil(maxLength / k) steps. */
  maxLength: number;
  /** b_at; 1 = greedy stage I. */
  beamSize: number;
  /** b_nat ≤ b_at (default b_at). */
  natBeams?: number;
  lengthPenalty: number;
  earlyStopping?: boolean | 'never';
}

export interface HrtResult {
  /** The translation's ids, without the eos. */
  ids: number[];
  /** The chosen hypothesis' Skip-AT tokens z_1..z_m (with its final eos when it has one). */
  z: number[];
  /** Eq. 2: stage-I score before the length penalty + the Skip-CMLM log-probs of all masked positions (NaN for greedy). */
  score: number;
  /** Decoder graph calls: stage-I steps (+ 1 for stage II when k > 1). */
  steps: number;
}

/** Log-softmax (float64) of row r of logits [rows, t, vocab] at position p. */
function logSoftmaxAt(logits: Tensor, r: number, p: number): Float64Array {
  const [, t, v] = logits.dims as [number, number, number];
  return logSoftmax(logits.nums, (r * t + p) * v, v);
}

/** A runner that adds the Skip-AT position_ids to decoder / decoder_with_past feeds: s·k for the token of step s. */
export function withSkipPositions(run: GraphRunner, k: number): GraphRunner {
  return (graph, feeds) => {
    const ids = feeds.input_ids!;
    const [b, t] = ids.dims as [number, number];
    if (graph === 'decoder') {
      return run(graph, {
        ...feeds,
        position_ids: Tensor.fromNumbers(
          'int64',
          [b, t],
          Array.from({ length: b * t }, (_, i) => (i % t) * k),
        ),
      });
    }
    if (graph === 'decoder_with_past') {
      const past = feeds['past_key_values.0.decoder.key']!.dims[2]!;
      return run(graph, {
        ...feeds,
        position_ids: Tensor.fromNumbers('int64', [b, 1], new Array<number>(b).fill(past * k)),
      });
    }
    return run(graph, feeds);
  };
}

/** HRT decoding of one source (ids as the model takes them, eos included). */
export async function hrtDecodeOne(run: GraphRunner, source: number[], o: HrtOptions): Promise<HrtResult> {
  const k = o.k;
  const bos = o.hrt.bos_k_ids[String(k)];
  if (bos === undefined) throw new Error(`chunk size ${k}: the model has no bos_k_ids["${k}"]`);
  const mAt = Math.ceil(o.maxLength / k);
  const stageI = { ...o, startId: bos, maxLength: mAt };
  const positioned = withSkipPositions(run, k);
  let calls = 0;
  const counted: GraphRunner = (g, f) => {
    if (g !== 'encoder') calls++;
    return positioned(g, f);
  };
  // Stage I: hypotheses best first, as (ids without eos, stage-I score before the length penalty)
  let hyps: { ids: number[]; at: number }[];
  if (o.beamSize === 1) {
    hyps = [{ ids: (await greedyDecode(counted, [source], stageI))[0]!, at: Number.NaN }];
  } else {
    const found = await beamDecodeOne(counted, source, {
      ...stageI,
      beamSize: o.beamSize,
      lengthPenalty: o.lengthPenalty,
      earlyStopping: o.earlyStopping,
    });
    // finished hypotheses only (beamSearch pads its set with -1e9 entries); the length counts the eos when present
    hyps = found
      .filter((h) => h.score > -1e8)
      .map((h) => ({ ids: h.ids, at: h.score * Math.min(h.ids.length + 1, mAt) ** o.lengthPenalty }));
  }
  const eos = o.eosId;
  const zs = hyps.map((h) => (h.ids.length < mAt ? [...h.ids, eos] : h.ids));
  if (k === 1) return { ids: hyps[0]!.ids, z: zs[0]!, score: hyps[0]!.at, steps: calls };
  const kept = zs.slice(0, Math.min(o.natBeams ?? o.beamSize, zs.length));
  // Stage II: one decoder_nat call, rows padded with input 0, position 0, decoder_attention_mask 0
  const inputs = kept.map((z) =>
    Array.from({ length: z.length * k }, (_, i) => ((i + 1) % k === 0 ? z[(i + 1) / k - 1]! : o.hrt.mask_id)),
  );
  const T = Math.max(...inputs.map((x) => x.length));
  const pad = (xs: number[], v: number) => [...xs, ...new Array<number>(T - xs.length).fill(v)];
  const b = kept.length;
  const src = Tensor.fromNumbers('int64', [1, source.length], source);
  const srcMask = Tensor.fromNumbers(
    'int64',
    [1, source.length],
    source.map(() => 1),
  );
  const enc = (await run('encoder', { input_ids: src, attention_mask: srcMask })).last_hidden_state!;
  const rep = (t: Tensor) =>
    Tensor.fromNumbers(t.dtype, [b, ...t.dims.slice(1)], Array.from({ length: b }, () => Array.from(t.nums)).flat());
  const logits = (
    await run('decoder_nat', {
      input_ids: Tensor.fromNumbers(
        'int64',
        [b, T],
        inputs.flatMap((x) => pad(x, 0)),
      ),
      position_ids: Tensor.fromNumbers(
        'int64',
        [b, T],
        inputs.flatMap((x) =>
          pad(
            x.map((_, i) => i + 1),
            0,
          ),
        ),
      ),
      decoder_attention_mask: Tensor.fromNumbers(
        'int64',
        [b, T],
        inputs.flatMap((x) =>
          pad(
            x.map(() => 1),
            0,
          ),
        ),
      ),
      encoder_attention_mask: rep(srcMask),
      encoder_hidden_states: rep(enc),
    })
  ).logits!;
  calls++;
  let best: HrtResult | undefined;
  inputs.forEach((inp, r) => {
    let nat = 0;
    const y = inp.map((tok, p) => {
      if (tok !== o.hrt.mask_id) return tok;
      const lp = logSoftmaxAt(logits, r, p);
      let t = 0;
      for (let v = 1; v < lp.length; v++) if (lp[v]! > lp[t]!) t = v;
      nat += lp[t]!;
      return t;
    });
    const cut = y.indexOf(eos);
    const res = {
      ids: (cut < 0 ? y : y.slice(0, cut)).slice(0, o.maxLength - 1),
      z: kept[r]!,
      score: hyps[r]!.at + nat,
      steps: calls,
    };
    if (!best || res.score > best.score) best = res; // ties (and greedy's NaN): the earlier stage-I rank
  });
  return best!;
}
