// Smoke check of an HRT export (docs/hrt.md) with onnxruntime-node: loads the four graphs, checks the contract's inputs
// and outputs, and decodes the first test sentences with HRT greedy (stage I: decoder_model then
// decoder_with_past with position_ids s·k; stage II: one decoder_nat_model pass), k = 1 and each of hrt.chunk_sizes.
// With --expect FILE (scripts/hrt/decode.py --json), the ids must equal torch's. Then the same with
// test/reference/hrt.ts (greedy must equal the above; beam b_at = 4 with b_nat = 4 and 1 is run for a few sentences).
//   node --import tsx scripts/hrt/check.ts FOLDER [--n 20] [--max-len 64] [--min-steps N] [--expect torch.json]
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { REPO_ROOT, sharedDir } from '../../compiler/paths.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { logSoftmax } from '../../test/reference/log-softmax.ts';
import type { GraphRunner } from '../../test/reference/greedy.ts';
import { hrtDecodeOne, type HrtOptions } from '../../test/reference/hrt.ts';

const args = process.argv.slice(2);
const folder = args[0];
if (!folder) throw new Error('usage: check.ts FOLDER [--n N] [--max-len L] [--expect FILE] [--data ES_EN_FOLDER]');
const opt = (name: string, def: string) => (args.includes(name) ? args[args.indexOf(name) + 1]! : def);
const n = Number(opt('--n', '20'));
const maxLen = Number(opt('--max-len', '64'));
const data = opt('--data', join(sharedDir() ?? join(REPO_ROOT, '..', 'shared'), 'models', 'es-en'));
const minSteps = Number(opt('--min-steps', '0')); // smoke tests of barely trained models: no eos in the first N Skip-AT steps
const expectFile = args.includes('--expect') ? opt('--expect', '') : undefined;

interface Hrt {
  version: number;
  chunk_sizes: number[];
  bos_k_ids: Record<string, number>;
  mask_id: number;
  input_vocab_size: number;
  nat_graph: string;
}
const config = JSON.parse(readFileSync(join(folder, 'config.json'), 'utf8')) as {
  vocab_size: number;
  eos_token_id: number;
  hrt?: Hrt;
};
const hrt = config.hrt;
if (!hrt) throw new Error(`${folder}: config.json has no hrt section`);
const EOS = config.eos_token_id;
const V = config.vocab_size;

const files: Record<string, string> = {
  encoder: 'encoder_model.onnx',
  decoder: 'decoder_model.onnx',
  decoder_with_past: 'decoder_with_past_model.onnx',
  decoder_nat: hrt.nat_graph,
};
const s: Record<string, ort.InferenceSession> = {};
for (const [g, f] of Object.entries(files))
  s[g] = await ort.InferenceSession.create(join(folder, f), { intraOpNumThreads: 1 });

// contract: inputs and outputs by name
const want: Record<string, string[]> = {
  decoder: ['input_ids', 'position_ids', 'encoder_attention_mask', 'encoder_hidden_states'],
  decoder_with_past: ['input_ids', 'position_ids', 'encoder_attention_mask'],
  decoder_nat: [
    'input_ids',
    'position_ids',
    'decoder_attention_mask',
    'encoder_attention_mask',
    'encoder_hidden_states',
  ],
};
for (const [g, names] of Object.entries(want)) {
  const missing = names.filter((x) => !s[g]!.inputNames.includes(x));
  if (missing.length) throw new Error(`${files[g]}: missing inputs ${missing.join(', ')}`);
}
if (s.decoder_nat!.outputNames.join() !== 'logits')
  throw new Error(`${hrt.nat_graph}: outputs ${s.decoder_nat!.outputNames.join()}, want logits`);

const i64 = (dims: number[], xs: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(xs, (x) => BigInt(x)),
    dims,
  );

/** float64 log-softmax of logits row `r` (a [.., V] float32 tensor's r-th vocabulary row). */
const logSoftmaxOf = (t: ort.Tensor, r: number): Float64Array => logSoftmax(t.data as Float32Array, r * V, V);
const argmax = (xs: Float64Array) => xs.reduce((b, x, i) => (x > xs[b]! ? i : b), 0);

async function hrtGreedy(
  src: number[],
  k: number,
): Promise<{ ids: number[]; z: number[]; score: number; steps: number }> {
  const S = src.length;
  const encMask = i64(
    [1, S],
    src.map(() => 1),
  );
  const enc = (await s.encoder!.run({ input_ids: i64([1, S], src), attention_mask: encMask })).last_hidden_state!;
  const mAt = Math.ceil(maxLen / k);
  const z: number[] = [];
  let at = 0;
  let out = await s.decoder!.run({
    input_ids: i64([1, 1], [hrt!.bos_k_ids[String(k)]!]),
    position_ids: i64([1, 1], [0]),
    encoder_attention_mask: encMask,
    encoder_hidden_states: enc,
  });
  const past: Record<string, ort.Tensor> = {};
  let steps = 1;
  for (let step = 0; step < mAt; step++) {
    const lp = logSoftmaxOf(out.logits!, 0);
    const choose = Float64Array.from(lp);
    if (step < minSteps) choose[EOS] = -Infinity;
    const forced = step === mAt - 1; // forced eos at the last step; a forced token scores 0 (generate()'s rule)
    const tok = forced ? EOS : argmax(choose);
    at += forced ? 0 : lp[tok]!;
    z.push(tok);
    if (tok === EOS) break;
    for (const [name, v] of Object.entries(out))
      if (name.startsWith('present.')) past[name.replace('present.', 'past_key_values.')] = v;
    out = await s.decoder_with_past!.run({
      input_ids: i64([1, 1], [tok]),
      position_ids: i64([1, 1], [(step + 1) * k]),
      encoder_attention_mask: encMask,
      ...past,
    });
    steps++;
  }
  if (k === 1) return { ids: z.at(-1) === EOS ? z.slice(0, -1) : z, z, score: at, steps };
  const len = z.length * k;
  const inp = Array.from({ length: len }, (_, i) => ((i + 1) % k === 0 ? z[(i + 1) / k - 1]! : hrt!.mask_id));
  const nat = (
    await s.decoder_nat!.run({
      input_ids: i64([1, len], inp),
      position_ids: i64(
        [1, len],
        inp.map((_, i) => i + 1),
      ),
      decoder_attention_mask: i64(
        [1, len],
        inp.map(() => 1),
      ),
      encoder_attention_mask: encMask,
      encoder_hidden_states: enc,
    })
  ).logits!;
  let natScore = 0;
  const y = inp.map((tok, i) => {
    if (tok !== hrt!.mask_id) return tok;
    const lp = logSoftmaxOf(nat, i);
    const t = argmax(lp);
    natScore += lp[t]!;
    return t;
  });
  const cut = y.indexOf(EOS);
  return { ids: (cut < 0 ? y : y.slice(0, cut)).slice(0, maxLen - 1), z, score: at + natScore, steps: steps + 1 };
}

const srcs = (JSON.parse(readFileSync(join(data, 'test_ids.json'), 'utf8')) as { src_ids: number[][] }).src_ids.slice(
  0,
  n,
);
const expected = expectFile
  ? (
      JSON.parse(readFileSync(expectFile, 'utf8')) as {
        out: Record<string, { ids: number[]; z?: number[]; score: number }[]>;
      }
    ).out
  : undefined;
let bad = 0;
for (const k of [1, ...hrt.chunk_sizes]) {
  let steps = 0;
  const t0 = performance.now();
  const rows = [];
  for (const src of srcs) rows.push(await hrtGreedy(src, k));
  const ms = performance.now() - t0;
  for (const r of rows) steps += r.steps;
  let same = 0;
  let maxScoreDiff = 0;
  rows.forEach((r, i) => {
    const e = expected?.[String(k)]?.[i];
    if (!e) return;
    if (e.ids.join() === r.ids.join() && (e.z === undefined || e.z.join() === r.z.join())) same++;
    else if (bad++ < 5)
      console.log(`k=${k} sentence ${i}: ort ${JSON.stringify(r.ids)} torch ${JSON.stringify(e.ids)}`);
    maxScoreDiff = Math.max(maxScoreDiff, Math.abs(e.score - r.score));
  });
  console.log(
    `k=${k}: ${rows.length} sentences, ${(steps / rows.length).toFixed(2)} decoder calls/sentence, ${(ms / rows.length).toFixed(1)} ms/sentence; first: ${JSON.stringify(rows[0]!.ids.slice(0, 12))}` +
      (expected ? `; equal to torch ${same}/${rows.length}, max |score diff| ${maxScoreDiff.toExponential(2)}` : ''),
  );
}
// Batched Skip-CMLM with row padding (decoder_attention_mask 0, input 0, position 0) equals each row alone.
{
  const k = hrt.chunk_sizes[0]!;
  const rows = srcs.slice(0, 3);
  const zs = rows.map((_, i) => Array.from({ length: 2 + 2 * i }, (_, j) => (j === 1 + 2 * i ? EOS : 100 + 7 * i + j)));
  const natIn = zs.map((z) =>
    Array.from({ length: z.length * k }, (_, p) => ((p + 1) % k === 0 ? z[(p + 1) / k - 1]! : hrt.mask_id)),
  );
  const S = Math.max(...rows.map((r) => r.length));
  const T = Math.max(...natIn.map((r) => r.length));
  const padTo = (xs: number[], n: number, v: number) => [...xs, ...new Array<number>(n - xs.length).fill(v)];
  const encMask = i64(
    [rows.length, S],
    rows.flatMap((r) =>
      padTo(
        r.map(() => 1),
        S,
        0,
      ),
    ),
  );
  const enc = (
    await s.encoder!.run({
      input_ids: i64(
        [rows.length, S],
        rows.flatMap((r) => padTo(r, S, 0)),
      ),
      attention_mask: encMask,
    })
  ).last_hidden_state!;
  const batched = (
    await s.decoder_nat!.run({
      input_ids: i64(
        [rows.length, T],
        natIn.flatMap((r) => padTo(r, T, 0)),
      ),
      position_ids: i64(
        [rows.length, T],
        natIn.flatMap((r) =>
          padTo(
            r.map((_, p) => p + 1),
            T,
            0,
          ),
        ),
      ),
      decoder_attention_mask: i64(
        [rows.length, T],
        natIn.flatMap((r) =>
          padTo(
            r.map(() => 1),
            T,
            0,
          ),
        ),
      ),
      encoder_attention_mask: encMask,
      encoder_hidden_states: enc,
    })
  ).logits!;
  let maxDiff = 0;
  for (let r = 0; r < rows.length; r++) {
    const src = rows[r]!;
    const m1 = i64(
      [1, src.length],
      src.map(() => 1),
    );
    const e1 = (await s.encoder!.run({ input_ids: i64([1, src.length], src), attention_mask: m1 })).last_hidden_state!;
    const inp = natIn[r]!;
    const one = (
      await s.decoder_nat!.run({
        input_ids: i64([1, inp.length], inp),
        position_ids: i64(
          [1, inp.length],
          inp.map((_, p) => p + 1),
        ),
        decoder_attention_mask: i64(
          [1, inp.length],
          inp.map(() => 1),
        ),
        encoder_attention_mask: m1,
        encoder_hidden_states: e1,
      })
    ).logits!;
    const a = batched.data as Float32Array;
    const b = one.data as Float32Array;
    for (let p = 0; p < inp.length; p++)
      for (let v = 0; v < V; v++) maxDiff = Math.max(maxDiff, Math.abs(a[(r * T + p) * V + v]! - b[p * V + v]!));
  }
  console.log(`decoder_nat batched with padding vs alone: max |logit diff| ${maxDiff.toExponential(2)}`);
  if (!(maxDiff < 1e-3)) {
    bad++;
    console.log('padding changes decoder_nat results');
  }
}
// test/reference/hrt.ts over the same sessions
const runner: GraphRunner = async (graph, feeds) => {
  const f: Record<string, ort.Tensor> = {};
  for (const [name, t] of Object.entries(feeds)) {
    f[name] =
      t.dtype === 'int64'
        ? i64([...t.dims], Array.from(t.nums))
        : new ort.Tensor('float32', Float32Array.from(t.nums), [...t.dims]);
  }
  const out = await s[graph]!.run(f);
  return Object.fromEntries(
    Object.entries(out).map(([name, v]) => [
      name,
      v.type === 'float32'
        ? Tensor.fromNumbers('float32', v.dims.map(Number), v.data as Float32Array)
        : Tensor.fromNumbers('int64', v.dims.map(Number), Array.from(v.data as BigInt64Array, Number)),
    ]),
  );
};
for (const k of [1, ...hrt.chunk_sizes]) {
  const base: HrtOptions = {
    k,
    hrt,
    maxLength: maxLen,
    beamSize: 1,
    lengthPenalty: 1,
    startId: 0,
    eosId: EOS,
    padId: 0,
    forcedEosId: EOS,
    minNewTokens: minSteps,
  };
  let same = 0;
  for (let i = 0; i < srcs.length; i++) {
    const r = await hrtDecodeOne(runner, srcs[i]!, base);
    const mine = await hrtGreedy(srcs[i]!, k);
    if (r.ids.join() === mine.ids.join() && r.z.join() === mine.z.join()) same++;
    else if (bad++ < 5)
      console.log(`reference.ts k=${k} sentence ${i}: ${JSON.stringify(r.ids)} vs ${JSON.stringify(mine.ids)}`);
  }
  const beams = [];
  for (const natBeams of [4, 1]) {
    for (let i = 0; i < Math.min(3, srcs.length); i++) {
      const r = await hrtDecodeOne(runner, srcs[i]!, { ...base, beamSize: 4, natBeams });
      beams.push(
        `b_nat ${natBeams} #${i}: ${r.steps} calls, S ${r.score.toFixed(3)}, ${JSON.stringify(r.ids.slice(0, 8))}`,
      );
    }
  }
  console.log(`reference.ts k=${k}: greedy equal ${same}/${srcs.length}; beam 4: ${beams.join('; ')}`);
}
if (bad) {
  console.log(`${bad} sentences differ from torch`);
  process.exitCode = 1;
} else console.log('ok');
