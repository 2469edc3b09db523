// Plan runs over resident buffers: resident feeds (in-place caches written there) and outputs give what arrays give,
// sync and async; bad resident tensors are clear errors from Plan, and bad raw views clear errors from the addon.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { buildPlan } from '../codegen/build-plan.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { CACHE_INPUT_PREFIX } from '../compiler/plan/io-names.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import type { Backend } from '../runtime/backend.ts';
import { native, nativeAvailable, type NativeProgram } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { FeedTensor, Resident, ResidentTensor, RtTensor } from '../runtime/tensor.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { before } from './helpers/before.ts';
import { cloneFeeds, randomFeeds } from './helpers/random-feeds.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';

const NAMES = [
  'resident feeds and outputs give what arrays give; in-place caches are written in the buffer (sync and async)',
  'bad resident tensors are PlancErrors naming the feed or output',
  'bad raw resident views are native errors, not crashes',
];

/** The error message a function throws (or a promise rejects with). */
async function thrown(f: () => unknown): Promise<string> {
  try {
    await f();
  } catch (e) {
    return (e as Error).message;
  }
  return '';
}

const numbers = (t: { data: ArrayLike<number | bigint> }) => Array.from(t.data, Number);

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, NAMES);
} else {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-resident-run-'));
  let plan: Plan;
  let other: Plan;
  let feeds: Record<string, RtTensor>;
  before(test, () => {
    const dir = path.join(tmp, 'model');
    makeModel({
      arch: 'marian',
      d: 32,
      encoderLayers: 1,
      decoderLayers: 2,
      heads: 2,
      ffn: 64,
      vocab: 80,
      maxPos: 64,
      activation: 'relu',
      seed: 4,
      out: dir,
    });
    const built = buildPlan(runPipeline(importSeq2SeqDir(dir), { topk: TRANSLATE_TOPK }), {
      target: 'cpu',
      maxBatch: 3,
      maxSrcLen: 8,
      maxTgtLen: 8,
    });
    plan = loadPlanBytes(encodePlan(built.header, built.blob), 'resident-run.plan');
    other = loadPlanBytes(encodePlan(built.header, built.blob), 'other.plan');
    feeds = randomFeeds(plan, 'decoder_with_past', { batch: 3, srcLen: 6, past: 3, vocab: 80, seed: 9 });
  });
  test.after(() => {
    plan?.close();
    other?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** Every float32 feed moved into one resident buffer (at 256-byte aligned offsets); the others stay arrays. */
  function residentFeeds(src: Record<string, RtTensor>): { buf: Resident; feeds: Record<string, FeedTensor> } {
    const at: Record<string, number> = {};
    let bytes = 0;
    for (const [k, t] of Object.entries(src)) {
      if (t.dtype !== 'float32') continue;
      at[k] = bytes;
      bytes += Math.ceil(t.data.byteLength / 256) * 256;
    }
    const buf = plan.residentNew(bytes);
    const out: Record<string, FeedTensor> = {};
    for (const [k, t] of Object.entries(src)) {
      if (at[k] === undefined) {
        out[k] = t;
        continue;
      }
      plan.residentWrite(buf, at[k]!, t.data);
      out[k] = { dtype: t.dtype, dims: t.dims, resident: buf, offset: at[k]! };
    }
    return { buf, feeds: out };
  }

  test(NAMES[0]!, async () => {
    const arrays = cloneFeeds(feeds);
    const want = plan.runSync('decoder_with_past', arrays);
    const caches = Object.keys(feeds).filter((k) => k.startsWith(CACHE_INPUT_PREFIX));
    assert.ok(caches.length > 0);
    for (const mode of ['sync', 'async'] as const) {
      const { buf, feeds: rf } = residentFeeds(cloneFeeds(feeds));
      const outBuf = plan.residentNew(4096);
      const lp = want.topk_logprobs!;
      const into: Record<string, ResidentTensor> = {
        topk_logprobs: { dtype: 'float32', dims: lp.dims, resident: outBuf, offset: 512 },
      };
      const got =
        mode === 'sync' ? plan.runSync('decoder_with_past', rf, into) : await plan.run('decoder_with_past', rf, into);
      assert.equal(Object.keys(got), ['topk_ids'], `${mode}: outputs written into resident buffers are not returned`);
      assert.equal(numbers(got.topk_ids!), numbers(want.topk_ids!), `${mode}: topk_ids`);
      const lpBack = new Float32Array(lp.data.length);
      plan.residentRead(outBuf, 512, lpBack);
      assert.equal(Array.from(lpBack), numbers(lp), `${mode}: topk_logprobs in the resident buffer`);
      for (const k of caches) {
        const t = rf[k] as ResidentTensor;
        const back = new Float32Array(arrays[k]!.data.length);
        plan.residentRead(buf, t.offset, back);
        assert.equal(Array.from(back), numbers(arrays[k]!), `${mode}: ${k} written in place in the resident buffer`);
      }
      plan.residentFree(buf);
      plan.residentFree(outBuf);
    }
  });

  test(NAMES[1]!, async () => {
    const { buf, feeds: rf } = residentFeeds(cloneFeeds(feeds));
    const cache = Object.keys(rf).find((k) => k.startsWith(CACHE_INPUT_PREFIX))!;
    const c = rf[cache] as ResidentTensor;
    const run = (patch: Record<string, FeedTensor>, into?: Record<string, ResidentTensor>) =>
      thrown(() => plan.runSync('decoder_with_past', { ...rf, ...patch }, into));
    const small = plan.residentNew(64);
    assert.match(
      await run({ [cache]: { ...c, resident: small, offset: 0 } }),
      new RegExp(
        `PLANC_E405: feed '${cache.replace(/\./g, '\\.')}' needs bytes \\[0, \\d+\\) of its resident buffer, which holds 64`,
      ),
    );
    assert.match(
      await run({ [cache]: { ...c, offset: c.offset + 2 } }),
      /feed '.*' has offset \d+; it must be a multiple of 4 bytes/,
    );
    assert.match(
      await run({ [cache]: { ...c, offset: buf.bytes } }),
      /needs bytes \[\d+, \d+\) of its resident buffer/,
    );
    assert.match(await run({ [cache]: { ...c, dtype: 'int32' } }), /feed '.*' is int32, the plan wants float32/);
    assert.match(
      await run({ [cache]: { ...c, dims: [3, 2, 8, 3] } }),
      /feed '.*' has dims \[3,2,8,3\], but dim 3 must be 16/,
    );
    const theirs = other.residentNew(buf.bytes);
    assert.match(await run({ [cache]: { ...c, resident: theirs } }), /feed '.*' is a resident buffer of another plan/);
    assert.match(
      await run({ past_sequence_length: { dtype: 'int64', dims: [], resident: buf, offset: 0 } }),
      /feed 'past_sequence_length' gives past_decoder_sequence_length by its value, so it must be a BigInt64Array/,
    );
    const out = plan.residentNew(4096);
    assert.match(
      await run({}, { topk_ids: { dtype: 'int64', dims: [3, 1, 4], resident: out, offset: 0 } }),
      /output 'topk_ids' has dims \[3,1,8\] here, but its resident tensor says \[3,1,4\]/,
    );
    assert.match(
      await run({}, { logits: { dtype: 'float32', dims: [3, 1, 80], resident: out, offset: 0 } }),
      /unknown output 'logits' to write into a resident buffer/,
    );
    assert.match(
      await run({}, { topk_ids: { dtype: 'int64', dims: [3, 1, 8], resident: small, offset: 0 } }),
      /output 'topk_ids' needs bytes \[0, 192\) of its resident buffer, which holds 64/,
    );
    assert.match(
      await thrown(() => plan.residentCopy(buf, theirs, [0, 0, 4])),
      /PLANC_E405: a resident buffer of another plan/,
    );
    assert.match(await thrown(() => plan.residentNew(-3)), /PLANC_E405: resident buffer size -3 must be an integer/);
    plan.residentFree(out);
    assert.match(
      await run({}, { topk_ids: { dtype: 'int64', dims: [3, 1, 8], resident: out, offset: 0 } }),
      /PLANC_E406: .*outputs\[1\]: the resident buffer was freed/,
    );
    other.residentFree(theirs);
    plan.residentFree(small);
    plan.residentFree(buf);
  });

  test(NAMES[2]!, async () => {
    const backend = (plan as unknown as { backend: Backend }).backend;
    const graph = 'decoder_with_past';
    const p = plan.header.programs.find((x) => x.graph === graph)!;
    const buf = plan.residentNew(1 << 16);
    const theirs = other.residentNew(1 << 16);
    const symbols = BigInt64Array.from(
      p.symbols.map((s) =>
        BigInt(
          s.name === 'batch_size' ? 3 : s.name === 'encoder_sequence_length' ? 6 : s.name === 'cache_capacity' ? 8 : 3,
        ),
      ),
    );
    const cacheAt = p.inputs.findIndex((i) => i.name.startsWith(CACHE_INPUT_PREFIX));
    const cacheBytes = 3 * 2 * 8 * 16 * 4;
    const run = (view: object) => {
      const data = p.inputs.map((io, i) => (i === cacheAt ? view : cloneFeeds(feeds)[io.name]!.data));
      return thrown(() =>
        backend.runSync(graph, symbols, data as never, [new Float32Array(24), new BigInt64Array(24)]),
      );
    };
    assert.match(
      await run({ resident: buf.handle, offset: (1 << 16) - 8, bytes: cacheBytes }),
      new RegExp(`feeds\\[${cacheAt}\\]: \\[65528, \\d+\\) is outside the resident buffer of 65536 bytes`),
    );
    assert.match(
      await run({ resident: buf.handle, offset: 0, bytes: cacheBytes - 4 }),
      new RegExp(`has ${cacheBytes} bytes but its feed has ${cacheBytes - 4}`),
    );
    assert.match(await run({ resident: theirs.handle, offset: 0, bytes: cacheBytes }), /belongs to another plan/);
    assert.match(
      await run({ resident: buf.handle, offset: -1, bytes: cacheBytes }),
      /offset -1(\.0+)? and bytes \d+(\.0+)? must be integers in \[0, 2\^46\]/,
    );
    assert.match(
      await run({ resident: buf.handle, offset: 0.5, bytes: cacheBytes }),
      /must be integers in \[0, 2\^46\]/,
    );
    assert.match(
      await run({ resident: {}, offset: 0, bytes: cacheBytes }),
      new RegExp(`feeds\\[${cacheAt}\\] must be a TypedArray`),
    );
    assert.match(
      await thrown(() =>
        backend.run(
          graph,
          symbols,
          p.inputs.map((io, i) =>
            i === cacheAt ? { resident: buf.handle, offset: 8, bytes: 4 } : cloneFeeds(feeds)[io.name]!.data,
          ),
          [],
        ),
      ),
      new RegExp(`has ${cacheBytes} bytes but its feed has 4`),
    );
    // straight to the addon: a resident handle whose range the views do not give
    const program = (backend as unknown as { programs: Map<string, NativeProgram> }).programs.get(graph)!;
    const bare = p.inputs.map((io, i) => (i === cacheAt ? buf.handle : cloneFeeds(feeds)[io.name]!.data));
    assert.match(
      await thrown(() => native().programRun(program, symbols, bare, [new Float32Array(24), new BigInt64Array(24)])),
      /a resident buffer without its \(offset, bytes\) in views \(0 words\)/,
    );
    plan.residentFree(buf);
    assert.match(await run({ resident: buf.handle, offset: 0, bytes: cacheBytes }), /the resident buffer was freed/);
    other.residentFree(theirs);
  });
}

test.run();
