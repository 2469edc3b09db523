// Reference greedy decoding over the three HF seq2seq graphs, for any graph runner (planc's evaluator or onnxruntime).
import { Tensor } from '../../compiler/tensor.ts';
import { DecodingRules, type Conventions } from '../../runtime/decode/conventions.ts';

/** Runs one graph of the model ('encoder', 'decoder', 'decoder_with_past') on feeds; returns outputs by name. */
export type GraphRunner = (
  graph: string,
  feeds: Record<string, Tensor>,
) => Promise<Record<string, Tensor>> | Record<string, Tensor>;

/** The model's ids and generate() conventions (forced bos/eos, banned tokens, eos list), and the new-token cap. */
export interface GreedyOptions extends Conventions {
  maxLength: number;
}

/**
 * Greedy decoding of a batch of source id sequences: encoder once, decoder_model on the start token, then
 * decoder_with_past one token at a time, feeding present.* back as past_key_values.*. Each step takes the forced token
 * (forced bos first, forced eos at the last step) or the argmax over the tokens not banned. Returns the output ids
 * without the start token and without the end-of-sentence token.
 */
export async function greedyDecode(run: GraphRunner, sources: number[][], o: GreedyOptions): Promise<number[][]> {
  const b = sources.length;
  const len = Math.max(...sources.map((s) => s.length));
  const ids = Tensor.fromNumbers(
    'int64',
    [b, len],
    sources.flatMap((s) => [...s, ...new Array(len - s.length).fill(o.padId)]),
  );
  const mask = Tensor.fromNumbers(
    'int64',
    [b, len],
    sources.flatMap((s) => [...s.map(() => 1), ...new Array(len - s.length).fill(0)]),
  );
  const enc = (await run('encoder', { input_ids: ids, attention_mask: mask })).last_hidden_state!;
  const out: number[][] = sources.map(() => []);
  const done = new Array<boolean>(b).fill(false);
  let step = await run('decoder', {
    input_ids: Tensor.fromNumbers('int64', [b, 1], new Array(b).fill(o.startId)),
    encoder_attention_mask: mask,
    encoder_hidden_states: enc,
  });
  const encoderKV: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(step))
    if (k.includes('.encoder.')) encoderKV[k.replace('present.', 'past_key_values.')] = v;
  const rules = new DecodingRules(o);
  for (let t = 0; t < o.maxLength; t++) {
    const forced = rules.forced(t, t === o.maxLength - 1);
    const next =
      forced !== undefined
        ? new Array<number>(b).fill(forced)
        : argmaxLastStep(
            step.logits!,
            out.map((ids) => rules.banned(ids)),
          );
    next.forEach((tok, i) => {
      if (done[i]) return;
      if (rules.isEos(tok)) done[i] = true;
      else out[i]!.push(tok);
    });
    if (done.every((d) => d) || t === o.maxLength - 1) break;
    const feeds: Record<string, Tensor> = {
      input_ids: Tensor.fromNumbers(
        'int64',
        [b, 1],
        next.map((tok, i) => (done[i] ? o.padId : tok)),
      ),
      encoder_attention_mask: mask,
      ...encoderKV,
    };
    for (const [k, v] of Object.entries(step))
      if (k.includes('.decoder.')) feeds[k.replace('present.', 'past_key_values.')] = v;
    step = await run('decoder_with_past', feeds);
  }
  return out;
}

/** Argmax over the vocabulary at the last position of logits [batch, steps, vocab], skipping row i's banned[i]. */
export function argmaxLastStep(logits: Tensor, banned: ReadonlySet<number>[] = []): number[] {
  const [b, t, v] = logits.dims as [number, number, number];
  const x = logits.nums;
  const out: number[] = [];
  for (let i = 0; i < b; i++) {
    const base = (i * t + t - 1) * v;
    const skip = banned[i];
    let best = -1;
    for (let k = 0; k < v; k++) if ((best < 0 || x[base + k]! > x[base + best]!) && !skip?.has(k)) best = k;
    out.push(best);
  }
  return out;
}
