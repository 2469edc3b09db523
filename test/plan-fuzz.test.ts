// Mutated plans (truncations, byte flips, edited fields with valid checksums): each must load and run or throw a PlancError.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import protobuf from 'protobufjs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { tensorFrom } from '../runtime/tensor.ts';
import { DEFAULTS, makeModel } from '../scripts/make-model/generate.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';

import { rng } from '../scripts/fuzz/mutate.ts';

const PlanMsg = protobuf.loadSync(path.join(REPO_ROOT, 'compiler', 'plan', 'plan.proto')).lookupType('planc.Plan');

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [
    'the unmutated plan runs',
    '600 mutations: each loads and runs or throws a PlancError',
  ]);
} else {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-fuzz-'));
  makeModel({
    ...DEFAULTS,
    out: tmp,
    d: 16,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 2,
    ffn: 32,
    vocab: 50,
    maxPos: 32,
  });
  const model = importSeq2SeqDir(tmp);
  const built = buildPlan(model, { target: 'cpu', maxBatch: 2, maxSrcLen: 8, maxTgtLen: 8 });
  const good = encodePlan(built.header, built.blob);
  const feeds = {
    input_ids: tensorFrom('int64', [2, 5], [3, 4, 5, 6, 0, 7, 8, 9, 0, 0]),
    attention_mask: tensorFrom('int64', [2, 5], [1, 1, 1, 1, 1, 1, 1, 1, 1, 0]),
  };

  /** Loads and runs the encoder; returns 'ok' or 'error'; any other exception fails the test. */
  const attempt = (bytes: Uint8Array, what: string): 'ok' | 'error' => {
    let plan: Plan | undefined;
    try {
      plan = loadPlanBytes(bytes, what);
      plan.runSync('encoder', feeds);
      return 'ok';
    } catch (e) {
      if (!(e instanceof PlancError)) assert.unreachable(`${what}: not a PlancError: ${(e as Error).stack}`);
      return 'error';
    } finally {
      plan?.close();
    }
  };

  /** Re-encodes a header with fresh checksums, so the mutation reaches the validator and the native checks. */
  const reencode = (header: Record<string, unknown>): Uint8Array => {
    const head = PlanMsg.encode(PlanMsg.fromObject(header)).finish();
    const start = Math.ceil((24 + head.length) / 64) * 64;
    const out = new Uint8Array(start + built.blob.length);
    out.set(good.subarray(0, 24));
    const dv = new DataView(out.buffer);
    dv.setUint32(12, head.length, true);
    dv.setUint32(16, crc32(head) >>> 0, true);
    out.set(head, 24);
    out.set(built.blob, start);
    return out;
  };

  test('the unmutated plan runs', () => {
    assert.is(attempt(good, 'good'), 'ok');
  });

  test('600 mutations: each loads and runs or throws a PlancError', () => {
    const r = rng(12345);
    const counts = { ok: 0, error: 0 };
    const headLen = new DataView(good.buffer).getUint32(12, true);
    for (let i = 0; i < 600; i++) {
      let bytes: Uint8Array;
      const kind = i % 6;
      if (kind === 0) {
        bytes = good.slice(0, Math.floor(r() * good.length)); // truncation
      } else if (kind === 1) {
        bytes = good.slice();
        bytes[Math.floor(r() * bytes.length)] ^= 1 << Math.floor(r() * 8); // a bit flip anywhere
      } else if (kind === 2) {
        bytes = good.slice();
        new DataView(bytes.buffer).setUint32(12, Math.floor(r() * 2 ** 32), true); // header length edited
      } else if (kind === 3) {
        // bit flips inside the header with the checksum fixed: garbage reaches the decoder and validator
        bytes = good.slice();
        for (let k = 0; k < 1 + Math.floor(r() * 4); k++)
          bytes[24 + Math.floor(r() * headLen)] ^= 1 << Math.floor(r() * 8);
        new DataView(bytes.buffer).setUint32(16, crc32(bytes.subarray(24, 24 + headLen)) >>> 0, true);
      } else {
        // a structured edit of one numeric field (offset, length, dim, index, count...) with valid checksums
        const h = structuredClone(
          PlanMsg.toObject(PlanMsg.decode(good.subarray(24, 24 + headLen)), {
            longs: Number,
            defaults: true,
            arrays: true,
          }),
        ) as Record<string, unknown>;
        editRandomNumber(h, r);
        bytes = reencode(h);
      }
      counts[attempt(bytes, `mutation ${i}`)]++;
    }
    assert.ok(counts.error > 300, `most mutations are caught (${JSON.stringify(counts)})`);
  });

  test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
}

/** Sets one random number somewhere in the object tree to a value chosen to break bounds. */
function editRandomNumber(o: Record<string, unknown>, r: () => number): void {
  const slots: [Record<string, unknown> | unknown[], string | number][] = [];
  const walk = (x: unknown) => {
    if (Array.isArray(x)) x.forEach((v, i) => (typeof v === 'number' ? slots.push([x, i]) : walk(v)));
    else if (x && typeof x === 'object')
      for (const [k, v] of Object.entries(x))
        typeof v === 'number' ? slots.push([x as Record<string, unknown>, k]) : walk(v);
  };
  walk(o);
  const [holder, key] = slots[Math.floor(r() * slots.length)]!;
  const old = (holder as Record<string | number, number>)[key]!;
  const choices = [0, 1, -1, old + 1, old - 1, old * 2, 2 ** 31, 2 ** 32 + 7, 2 ** 40, 63, 64, 7];
  (holder as Record<string | number, number>)[key] = choices[Math.floor(r() * choices.length)]!;
}

test.run();
