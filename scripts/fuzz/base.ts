// The one base of a fuzz run: a tiny synthetic model folder (scripts/make-model), its plan from `planc optimize`, valid
// feeds for its graphs and a valid --ids input. Every case mutates a copy of one of these; the rest is linked.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEFAULTS, makeModel } from '../make-model/generate.ts';

export const VOCAB = 50;
export const D = 16;
/** The profile every case's `planc optimize` uses (batch 1 is what translate needs; 2 lets feeds try batch 2). */
export const PROFILE = ['--max-batch', '2', '--max-src-len', '8', '--max-tgt-len', '8'];

export interface Base {
  dir: string;
  model: string;
  /** the model folder's files */
  modelFiles: string[];
  plan: string;
  planBytes: Uint8Array;
  /** valid feeds per graph, and the outputs that graph gives */
  feeds: Record<string, Record<string, unknown>>;
  outputs: Record<string, string[]>;
  /** two lines of token ids for translate --ids */
  ids: string;
  /** zoo families (Hugging Face exports) the onnx target also mutates, when ../shared has them */
  zoo: { name: string; dir: string; files: string[] }[];
}

const zeros = (...dims: number[]): unknown =>
  dims.length === 0 ? 0 : Array.from({ length: dims[0]! }, () => zeros(...dims.slice(1)));
const ramp = (n: number, scale: number, off = 0) =>
  Array.from({ length: n }, (_, i) => Number((Math.sin(i + off) * scale).toFixed(4)));

export function baseFeeds(): Record<string, Record<string, unknown>> {
  const hidden = [Array.from({ length: 5 }, (_, s) => ramp(D, 0.5, s))];
  return {
    encoder: { input_ids: [[3, 4, 5, 6, 0]], attention_mask: [[1, 1, 1, 1, 1]] },
    decoder: { input_ids: [[0]], encoder_attention_mask: [[1, 1, 1, 1, 0]], encoder_hidden_states: hidden },
    decoder_with_past: {
      input_ids: [[7]],
      encoder_attention_mask: [[1, 1, 1, 1, 1]],
      past_sequence_length: 2,
      'kv_cache.0.decoder.key': zeros(1, 2, 8, 8),
      'kv_cache.0.decoder.value': zeros(1, 2, 8, 8),
      'past_key_values.0.encoder.key': [
        [0, 1].map((h) => Array.from({ length: 5 }, (_, s) => ramp(8, 0.3, h * 5 + s))),
      ],
      'past_key_values.0.encoder.value': [
        [0, 1].map((h) => Array.from({ length: 5 }, (_, s) => ramp(8, 0.7, h * 7 + s))),
      ],
    },
  };
}

function run(planc: string, args: string[], cwd: string): string {
  const r = spawnSync(process.execPath, [planc, ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, PLANC_NUM_THREADS: '1' },
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0)
    throw new Error(
      `fuzz base: planc ${args.join(' ')} failed (exit ${r.status}, ${r.signal ?? 'no signal'}):\n${r.stderr}`,
    );
  return r.stdout;
}

/** Builds the base under `dir` (model folder, plan, feeds) and checks that it runs. */
export function buildBase(dir: string, planc: string, shared?: string): Base {
  fs.rmSync(dir, { recursive: true, force: true });
  const model = path.join(dir, 'model');
  fs.mkdirSync(model, { recursive: true });
  makeModel({
    ...DEFAULTS,
    out: model,
    d: D,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 2,
    ffn: 32,
    vocab: VOCAB,
    maxPos: 32,
  });
  const plan = path.join(dir, 'base.plan');
  run(planc, ['optimize', model, '-o', plan, ...PROFILE], dir);
  const feeds = baseFeeds();
  const outputs: Record<string, string[]> = {};
  for (const [graph, f] of Object.entries(feeds)) {
    const file = path.join(dir, `feeds.${graph}.json`);
    fs.writeFileSync(file, JSON.stringify(f));
    const out = JSON.parse(run(planc, ['run', plan, '--graph', graph, '--inputs', file, '--json'], dir)) as Record<
      string,
      { data: unknown[] }
    >;
    outputs[graph] = Object.keys(out);
    if (Object.values(out).some((t) => t.data.some((x) => x === null)))
      throw new Error(`fuzz base: graph ${graph} gives NaN on the base feeds`);
  }
  const ids = '3 4 5\n6 7 8 9\n';
  fs.writeFileSync(path.join(dir, 'ids.txt'), ids);
  const lines =
    run(planc, ['translate', plan, '--ids', '--input', path.join(dir, 'ids.txt')], dir).split('\n').length - 1;
  if (lines !== 2) throw new Error(`fuzz base: translate gave ${lines} lines for 2`);
  const zoo: Base['zoo'] = [];
  const zooDir = shared && path.join(shared, 'models', 'zoo');
  if (zooDir && fs.existsSync(zooDir)) {
    for (const name of ['marian', 'bart', 't5', 'mbart']) {
      const d = path.join(zooDir, name);
      if (fs.existsSync(path.join(d, 'encoder_model.onnx')))
        zoo.push({ name, dir: d, files: fs.readdirSync(d).filter((f) => f !== 'decoder_model_merged.onnx') });
    }
  }
  return {
    dir,
    model,
    modelFiles: fs.readdirSync(model),
    plan,
    planBytes: new Uint8Array(fs.readFileSync(plan)),
    feeds,
    outputs,
    ids,
    zoo,
  };
}
