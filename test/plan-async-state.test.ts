// Plan.run (the async native run, on copies of the feeds) leaves in-place KV caches exactly as Plan.runSync does.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { CACHE_INPUT_PREFIX, PAST_LENGTH_INPUT } from '../compiler/plan/io-names.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { skipSuite } from './helpers/skip.ts';

const NAME = 'async run of a step with in-place caches writes them like runSync (caches, outputs)';

if (!nativeAvailable()) {
  skipSuite(test, 'needs the native addon (npm run build:native)', [NAME]);
} else {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-async-state-'));
  const out = path.join(tmp, 'model');
  makeModel({
    arch: 'marian',
    d: 32,
    encoderLayers: 1,
    decoderLayers: 2,
    heads: 2,
    ffn: 64,
    vocab: 200,
    maxPos: 64,
    activation: 'relu',
    seed: 3,
    out,
  });
  const built = buildPlan(runPipeline(importSeq2SeqDir(out), { topk: TRANSLATE_TOPK }), {
    target: 'cpu',
    maxBatch: 2,
    maxSrcLen: 8,
    maxTgtLen: 8,
  });

  test(NAME, async () => {
    const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'async-state.plan');
    try {
      const bind = (d: string) =>
        /batch/.test(d)
          ? 2
          : /encoder/.test(d)
            ? 5
            : /decoder_sequence/.test(d)
              ? 1
              : /cache_capacity/.test(d)
                ? 8
                : Number(d);
      const feeds = (): Record<string, RtTensor> => {
        const f: Record<string, RtTensor> = {};
        for (const io of plan.inputs('decoder_with_past')) {
          const dims = io.dims.map(bind);
          const n = dims.reduce((a, b) => a * b, 1);
          f[io.name] =
            io.dtype === 'int64'
              ? { dtype: 'int64', dims, data: new BigInt64Array(n).fill(io.name === PAST_LENGTH_INPUT ? 3n : 1n) }
              : { dtype: 'float32', dims, data: Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) * 0.5) };
        }
        return f;
      };
      const a = feeds();
      const b = feeds();
      const caches = Object.keys(a).filter((k) => k.startsWith(CACHE_INPUT_PREFIX));
      assert.ok(caches.length > 0, 'the step has in-place caches');
      const outSync = plan.runSync('decoder_with_past', a);
      const outAsync = await plan.run('decoder_with_past', b);
      for (const k of caches) {
        assert.equal(
          Array.from(b[k]!.data as Float32Array),
          Array.from(a[k]!.data as Float32Array),
          `${k} after the async run`,
        );
        assert.not.equal(
          Array.from(a[k]!.data as Float32Array),
          Array.from(feeds()[k]!.data as Float32Array),
          `${k} was written`,
        );
      }
      for (const [k, t] of Object.entries(outSync))
        assert.equal(
          Array.from(outAsync[k]!.data as ArrayLike<number | bigint>),
          Array.from(t.data as ArrayLike<number | bigint>),
          k,
        );
    } finally {
      plan.close();
    }
  });
  test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
}

test.run();
