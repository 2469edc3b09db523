// Reference greedy decoding over the three HF seq2seq graphs, for any graph runner (planc's evaluator or onnxruntime).
import { Tensor } from '../../compiler/tensor.ts';

/** Runs one graph of the model ('encoder', 'decoder', 'decoder_with_past') on feeds; returns outputs by name. */
export type GraphRunner = (graph: string, feeds: Record<string, Tensor>) => Promise<Record<string, Tensor>> | Record<string, Tensor>;

export interface GreedyOptions {
  startId: number;
  eosId: number;
  padId: number;
  maxLength: number;
}

/**
 * Greedy decoding of a batch of source id sequences: encoder once, decoder_model on the start token, then
 * decoder_with_past one token at a time, feeding present.* back as past_key_values.*. Returns the output ids
 * without the start token and without the end-of-sentence token.
 */
export async function greedyDecode(run: GraphRunner, sources: number[][], o: GreedyOptions): Promise<number[][]> {
  const b = sources.length;
  const len = Math.max(...sources.map((s) => s.length));
  const ids = Tensor.fromNumbers('int64', [b, len], sources.flatMap((s) => [...s, ...new Array(len - s.length).fill(o.padId)]));
  const mask = Tensor.fromNumbers('int64', [b, len], sources.flatMap((s) => [...s.map(() => 1), ...new Array(len - s.length).fill(0)]));
  const enc = (await run('encoder', { input_ids: ids, attention_mask: mask })).last_hidden_state!;
  const out: number[][] = sources.map(() => []);
  const done = new Array<boolean>(b).fill(false);
  let step = await run('decoder', {
    input_ids: Tensor.fromNumbers('int64', [b, 1], new Array(b).fill(o.startId)),
    encoder_attention_mask: mask,
    encoder_hidden_states: enc,
  });
  const encoderKV: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(step)) if (k.includes('.encoder.')) encoderKV[k.replace('present.', 'past_key_values.')] = v;
  for (let t = 0; t < o.maxLength; t++) {
    const next = argmaxLastStep(step.logits!);
    next.forEach((tok, i) => {
      if (done[i]) return;
      if (tok === o.eosId) done[i] = true;
      else out[i]!.push(tok);
    });
    if (done.every((d) => d) || t === o.maxLength - 1) break;
    const feeds: Record<string, Tensor> = {
      input_ids: Tensor.fromNumbers('int64', [b, 1], next.map((tok, i) => (done[i] ? o.padId : tok))),
      encoder_attention_mask: mask,
      ...encoderKV,
    };
    for (const [k, v] of Object.entries(step)) if (k.includes('.decoder.')) feeds[k.replace('present.', 'past_key_values.')] = v;
    step = await run('decoder_with_past', feeds);
  }
  return out;
}

/** Argmax over the vocabulary at the last position of logits [batch, steps, vocab]. */
export function argmaxLastStep(logits: Tensor): number[] {
  const [b, t, v] = logits.dims as [number, number, number];
  const x = logits.nums;
  const out: number[] = [];
  for (let i = 0; i < b; i++) {
    const base = (i * t + t - 1) * v;
    let best = 0;
    for (let k = 1; k < v; k++) if (x[base + k]! > x[base + best]!) best = k;
    out.push(best);
  }
  return out;
}
