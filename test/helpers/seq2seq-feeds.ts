// Real feeds for the three seq2seq graphs: a padded batch of sentences, then onnxruntime's own outputs chained.
import { Tensor } from '../../compiler/tensor.ts';
import { argmaxLastStep as argmaxLast } from '../reference/greedy.ts';
import { ort, runOrt } from './ort.ts';

export interface GraphCase {
  feeds: Record<string, Tensor>;
  /** onnxruntime's outputs on the unmodified ONNX file. */
  expected: Record<string, Tensor>;
  /** The ONNX file onnxruntime ran (for a float64 reference where float32 itself misses a tolerance). */
  source?: string;
}

/** Encoder on the batch, decoder on [start, ORT's argmax], decoder_with_past one more step on ORT's presents. */
export async function seq2seqCases(
  sources: Record<string, string>,
  batch: number[][],
  startId = 0,
  padId = 0,
): Promise<Record<string, GraphCase>> {
  const sessions: Record<string, ort.InferenceSession> = {};
  for (const g of ['encoder', 'decoder', 'decoder_with_past'])
    sessions[g] = await ort.InferenceSession.create(sources[g]!);
  const len = Math.max(...batch.map((s) => s.length));
  const inputIds = Tensor.fromNumbers(
    'int64',
    [batch.length, len],
    batch.flatMap((s) => [...s, ...new Array(len - s.length).fill(padId)]),
  );
  const mask = Tensor.fromNumbers(
    'int64',
    [batch.length, len],
    batch.flatMap((s) => [...s.map(() => 1), ...new Array(len - s.length).fill(0)]),
  );
  const cases: Record<string, GraphCase> = {};
  const encFeeds = { input_ids: inputIds, attention_mask: mask };
  cases.encoder = { feeds: encFeeds, expected: await runOrt(sessions.encoder!, encFeeds), source: sources.encoder };
  const enc = cases.encoder.expected.last_hidden_state!;
  const first = await runOrt(sessions.decoder!, {
    input_ids: Tensor.fromNumbers(
      'int64',
      [batch.length, 1],
      batch.map(() => startId),
    ),
    encoder_attention_mask: mask,
    encoder_hidden_states: enc,
  });
  const best = argmaxLast(first.logits!);
  const decFeeds = {
    input_ids: Tensor.fromNumbers(
      'int64',
      [batch.length, 2],
      best.flatMap((t) => [startId, t]),
    ),
    encoder_attention_mask: mask,
    encoder_hidden_states: enc,
  };
  cases.decoder = { feeds: decFeeds, expected: await runOrt(sessions.decoder!, decFeeds), source: sources.decoder };
  const next = argmaxLast(cases.decoder.expected.logits!);
  const pastFeeds: Record<string, Tensor> = {
    input_ids: Tensor.fromNumbers('int64', [batch.length, 1], next),
    encoder_attention_mask: mask,
  };
  for (const [k, v] of Object.entries(cases.decoder.expected))
    if (k.startsWith('present.')) pastFeeds[k.replace('present.', 'past_key_values.')] = v;
  cases.decoder_with_past = {
    feeds: pastFeeds,
    expected: await runOrt(sessions.decoder_with_past!, pastFeeds),
    source: sources.decoder_with_past,
  };
  for (const s of Object.values(sessions)) await s.release();
  return cases;
}
