// The HRT decoding contract (docs/hrt.md section 3) as the reference decoder test/reference/hrt.ts implements it,
// on a scripted model behind a GraphRunner: the feeds each graph gets (start [BOS_k], position_ids s·k, the Skip-CMLM
// input of masks and Skip-AT tokens at positions 1..m·k, row padding), truncation at the first eos, the step cap and
// forced eos, and the final choice by paper eq. 2 with b_nat ≤ b_at. No model files, no onnxruntime.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Tensor } from '../compiler/tensor.ts';
import type { GraphRunner } from './reference/greedy.ts';
import { hrtDecodeOne, type HrtConfig, type HrtOptions } from './reference/hrt.ts';

const V = 16;
const EOS = 0;
const HRT: HrtConfig = {
  version: 1,
  chunk_sizes: [2, 3],
  bos_k_ids: { 1: EOS, 2: 13, 3: 14 },
  mask_id: 15,
  input_vocab_size: 16,
  nat_graph: 'decoder_nat_model.onnx',
};

interface Calls {
  decoder: { ids: number[]; pos: number[] }[];
  nat: { ids: number[][]; pos: number[][]; mask: number[][] }[];
}

/**
 * A scripted model. Its decoder's self-attention cache carries the token history (present.0.decoder.key
 * [b, 1, length, 1] holds the ids fed so far), so `next(history)` gives each row's next-token logits; `nat(row)` gives
 * the Skip-CMLM logits of one unpadded row (ids, positions). Every call's feeds are recorded.
 */
function scripted(
  next: (history: number[]) => number[],
  nat: (ids: number[], pos: number[]) => number[][],
): { run: GraphRunner; calls: Calls } {
  const calls: Calls = { decoder: [], nat: [] };
  const rows = (t: Tensor): number[][] => {
    const [b] = t.dims as [number];
    const w = t.nums.length / b;
    return Array.from({ length: b }, (_, i) => Array.from(t.nums.subarray(i * w, (i + 1) * w)));
  };
  const run: GraphRunner = (graph, feeds): Record<string, Tensor> => {
    if (graph === 'encoder') {
      const [b, s] = feeds.input_ids!.dims as [number, number];
      return { last_hidden_state: Tensor.fromNumbers('float32', [b, s, 1], new Array<number>(b * s).fill(0)) };
    }
    if (graph === 'decoder_nat') {
      const ids = rows(feeds.input_ids!);
      const pos = rows(feeds.position_ids!);
      const mask = rows(feeds.decoder_attention_mask!);
      calls.nat.push({ ids, pos, mask });
      const t = ids[0]!.length;
      const out = ids.flatMap((r, i) => {
        const n = mask[i]!.filter((x) => x === 1).length;
        const l = nat(r.slice(0, n), pos[i]!.slice(0, n));
        return [...l.flat(), ...new Array<number>((t - n) * V).fill(0)];
      });
      return { logits: Tensor.fromNumbers('float32', [ids.length, t, V], out) };
    }
    const ids = rows(feeds.input_ids!);
    const b = ids.length;
    assert.equal(feeds.position_ids!.dims, feeds.input_ids!.dims, `${graph}: position_ids shaped as input_ids`);
    calls.decoder.push({ ids: ids.map((r) => r[0]!), pos: Array.from(feeds.position_ids!.nums) });
    const past = graph === 'decoder_with_past' ? rows(feeds['past_key_values.0.decoder.key']!) : ids.map(() => []);
    const hist = ids.map((r, i) => [...past[i]!, ...r]);
    const len = hist[0]!.length;
    const s = feeds.encoder_attention_mask!.dims[1]!;
    const out: Record<string, Tensor> = {
      logits: Tensor.fromNumbers(
        'float32',
        [b, 1, V],
        hist.flatMap((h) => next(h)),
      ),
      'present.0.decoder.key': Tensor.fromNumbers('float32', [b, 1, len, 1], hist.flat()),
      'present.0.decoder.value': Tensor.fromNumbers('float32', [b, 1, len, 1], hist.flat()),
    };
    if (graph === 'decoder') {
      out['present.0.encoder.key'] = Tensor.fromNumbers('float32', [b, 1, s, 1], new Array<number>(b * s).fill(0));
      out['present.0.encoder.value'] = Tensor.fromNumbers('float32', [b, 1, s, 1], new Array<number>(b * s).fill(0));
    }
    return out;
  };
  return { run, calls };
}

/** Logits with `scores` at the given ids and -20 elsewhere. */
const peaked = (scores: Record<number, number>): number[] => Array.from({ length: V }, (_, v) => scores[v] ?? -20);
const base = (k: number, o: Partial<HrtOptions> = {}): HrtOptions => ({
  k,
  hrt: HRT,
  maxLength: 32,
  beamSize: 1,
  lengthPenalty: 1,
  startId: EOS,
  eosId: EOS,
  padId: EOS,
  forcedEosId: EOS,
  ...o,
});
const SRC = [5, 6, EOS];

test('greedy k = 2: [BOS_2] at 0, Skip-AT positions 0, 2, 4; Skip-CMLM [M] z1 [M] z2 [M] eos at 1..6; cut at the first eos', async () => {
  const script = [10, 11, EOS]; // z_1, z_2, z_3 = eos
  const { run, calls } = scripted(
    (h) => peaked({ [script[h.length - 1]!]: 5 }),
    (_, pos) => pos.map((p) => peaked({ [p === 5 ? EOS : p]: 5 })),
  );
  const r = await hrtDecodeOne(run, SRC, base(2));
  assert.equal(
    calls.decoder.map((c) => c.ids),
    [[13], [10], [11]],
  );
  assert.equal(
    calls.decoder.map((c) => c.pos),
    [[0], [2], [4]],
  );
  assert.equal(calls.nat.length, 1);
  assert.equal(calls.nat[0]!.ids, [[15, 10, 15, 11, 15, EOS]]);
  assert.equal(calls.nat[0]!.pos, [[1, 2, 3, 4, 5, 6]]);
  assert.equal(calls.nat[0]!.mask, [[1, 1, 1, 1, 1, 1]]);
  // the masked p = 1, 3 get id p; p = 5 gets eos: the output stops there
  assert.equal(r.z, [10, 11, EOS]);
  assert.equal(r.ids, [1, 10, 3, 11]);
  assert.is(r.steps, 4);
});

test('greedy k = 3: positions 0, 3, 6; masks at p % 3 != 0; the stage-I cap ceil(maxLength / 3) ends with a forced eos', async () => {
  const { run, calls } = scripted(
    () => peaked({ 7: 5 }),
    (ids) => ids.map(() => peaked({ 9: 5 })),
  );
  const r = await hrtDecodeOne(run, SRC, base(3, { maxLength: 7 })); // M_at = 3 steps: 7, 7, forced eos
  assert.equal(
    calls.decoder.map((c) => c.pos),
    [[0], [3], [6]],
  );
  assert.equal(
    calls.decoder.map((c) => c.ids),
    [[14], [7], [7]],
  );
  assert.equal(r.z, [7, 7, EOS]);
  assert.equal(calls.nat[0]!.ids, [[15, 15, 7, 15, 15, 7, 15, 15, EOS]]);
  assert.equal(r.ids, [9, 9, 7, 9, 9, 7]); // 6 = maxLength - 1 tokens
});

test('k = 1 is plain AT with the HRT model: start 0, positions 0, 1, 2, no Skip-CMLM call', async () => {
  const script = [4, 8, EOS];
  const { run, calls } = scripted(
    (h) => peaked({ [script[h.length - 1]!]: 5 }),
    () => {
      throw new Error('no Skip-CMLM call at k = 1');
    },
  );
  const r = await hrtDecodeOne(run, SRC, base(1));
  assert.equal(
    calls.decoder.map((c) => c.ids),
    [[EOS], [4], [8]],
  );
  assert.equal(
    calls.decoder.map((c) => c.pos),
    [[0], [1], [2]],
  );
  assert.equal(r.ids, [4, 8]);
  assert.is(calls.nat.length, 0);
});

test("beam: eq. 2 picks stage I's second hypothesis when its Skip-CMLM log-probs are better (b_nat 2), the first with b_nat 1", async () => {
  // stage I: 10 slightly ahead of 12, then eos; Skip-CMLM: rows with z_1 = 10 are flat (log 1/16 per mask), z_1 = 12 peaked
  const next = (h: number[]) => (h.length === 1 ? peaked({ 10: 2, 12: 1.9 }) : peaked({ [EOS]: 8 }));
  const nat = (ids: number[]) => ids.map(() => (ids[1] === 10 ? new Array<number>(V).fill(0) : peaked({ 3: 10 })));
  const one = scripted(next, nat);
  const b1 = await hrtDecodeOne(one.run, SRC, base(2, { beamSize: 2, natBeams: 1 }));
  assert.equal(b1.z, [10, EOS]);
  assert.equal(one.calls.nat[0]!.ids, [[15, 10, 15, EOS]]);
  const two = scripted(next, nat);
  const b2 = await hrtDecodeOne(two.run, SRC, base(2, { beamSize: 2, natBeams: 2 }));
  assert.equal(two.calls.nat[0]!.ids, [
    [15, 10, 15, EOS],
    [15, 12, 15, EOS],
  ]);
  assert.equal(b2.z, [12, EOS]);
  assert.equal(b2.ids, [3, 12, 3]);
  // S = stage-I sum (unpenalized) + both masked positions' log-probs
  const lse = (xs: number[]) => {
    const m = Math.max(...xs);
    return m + Math.log(xs.reduce((s, x) => s + Math.exp(x - m), 0));
  };
  const l0 = peaked({ 10: 2, 12: 1.9 });
  const l1 = peaked({ [EOS]: 8 });
  const expected = l0[12]! - lse(l0) + (l1[EOS]! - lse(l1)) + 2 * (10 - lse(peaked({ 3: 10 })));
  assert.ok(Math.abs(b2.score - expected) < 1e-5, `S ${b2.score} vs ${expected}`);
});

test('stage-II rows of different lengths are padded with id 0, position 0, mask 0', async () => {
  // two stage-I hypotheses of lengths 1 (eos at once) and 2
  const next = (h: number[]) => (h.length === 1 ? peaked({ [EOS]: 2, 10: 1.95 }) : peaked({ [EOS]: 8 }));
  const { run, calls } = scripted(next, (ids) => ids.map(() => peaked({ 3: 5 })));
  await hrtDecodeOne(run, SRC, base(2, { beamSize: 2, natBeams: 2 }));
  // stage-I order (length-penalized): [10, eos] (-0.36) before [eos] (-0.67)
  assert.equal(calls.nat[0]!.ids, [
    [15, 10, 15, EOS],
    [15, EOS, 0, 0],
  ]);
  assert.equal(calls.nat[0]!.pos, [
    [1, 2, 3, 4],
    [1, 2, 0, 0],
  ]);
  assert.equal(calls.nat[0]!.mask, [
    [1, 1, 1, 1],
    [1, 1, 0, 0],
  ]);
});

test.run();
