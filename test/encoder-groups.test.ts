// The encoder of a mixed-length batch run in groups (runtime/decode/encoder-groups.ts) and the int64 feeds it builds:
// the group cuts, int64 words without BigInt, and, on es-en, each row's own output (as one call over the whole batch
// gives it) with zeros in its padding.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sharedDir } from '../compiler/paths.ts';
import { encodeInGroups, encoderGroups } from '../runtime/decode/encoder-groups.ts';
import { runRunsSync } from '../runtime/decode/graph-runs.ts';
import { sourceFeeds } from '../runtime/decode/source-feeds.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan } from '../runtime/plan.ts';
import { bigInt64Of } from '../runtime/tensor.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, testIf } from './helpers/skip.ts';

const ESEN = sharedDir() && path.join(sharedDir()!, 'models', 'es-en');
const withShared = testIf(test, (!nativeAvailable() && NEEDS_NATIVE) || (!ESEN && needsShared('models/es-en')));

test('bigInt64Of: the same words as BigInt64Array.from, in and out of int32 range', () => {
  const values = [0, -0, 1, -1, 7, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, -(2 ** 31) - 1, 2 ** 40 + 3, -(2 ** 53) + 1];
  assert.equal([...bigInt64Of(values)], [...BigInt64Array.from(values, (v) => BigInt(v))]);
  assert.throws(() => bigInt64Of([1.5]), /cannot be converted|not an integer/);
});

test('sourceFeeds: rows padded to the longest with padId, mask 1 on tokens', () => {
  const { ids, mask } = sourceFeeds([[5, 6, 7], [8], []], 3);
  assert.equal(ids.dims, [3, 3]);
  assert.equal([...(ids.data as BigInt64Array)].map(Number), [5, 6, 7, 8, 3, 3, 3, 3, 3]);
  assert.equal([...(mask.data as BigInt64Array)].map(Number), [1, 1, 1, 1, 0, 0, 0, 0, 0]);
});

test('encoderGroups: one call for similar lengths, a cut where padding would cost more than a call', () => {
  assert.equal(encoderGroups([20, 19, 19, 18]), [[0, 4]]);
  assert.equal(encoderGroups([60, 60, 60, 4, 4, 4, 4, 4, 4, 4, 4]), [
    [0, 3],
    [3, 11],
  ]);
  // every row in exactly one contiguous group
  const lengths = [50, 41, 33, 30, 22, 18, 12, 9, 5, 3, 2, 1];
  const groups = encoderGroups(lengths);
  assert.equal(
    groups.flatMap(([a, b]) => Array.from({ length: b - a }, (_, i) => a + i)),
    [...lengths.keys()],
  );
});

withShared('es-en: rows encoded in groups equal the batch encoded in one call; their padding is zeros', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-enc-groups-'));
  try {
    const file = path.join(tmp, 'esen.plan');
    const r = planc(['optimize', ESEN!, '-o', file, '--quiet', '--max-batch', '8', '--max-tgt-len', '16']);
    assert.is(r.status, 0, r.stderr);
    const plan = await loadPlan(file);
    try {
      const ids: number[][] = JSON.parse(fs.readFileSync(path.join(ESEN!, 'test_ids.json'), 'utf8')).src_ids;
      const sources = [...ids.slice(0, 40)].sort((a, b) => b.length - a.length).filter((_, i) => i % 5 === 0);
      const groups = encoderGroups(sources.map((s) => s.length));
      assert.ok(groups.length > 1, `the lengths ${sources.map((s) => s.length)} make one group`);
      const S = sources[0]!.length;
      const D = 256;
      const hiddenBuf = plan.residentNew(sources.length * S * D * 4);
      plan.residentWrite(hiddenBuf, 0, new Float32Array(sources.length * S * D).fill(Number.NaN));
      const hidden = { dtype: 'float32' as const, dims: [sources.length, S, D], resident: hiddenBuf, offset: 0 };
      const taken: ReturnType<typeof plan.residentNew>[] = [];
      const take = (bytes: number) => {
        const t = plan.residentNew(bytes);
        plan.residentWrite(t, 0, new Float32Array(Math.ceil(bytes / 4)).fill(Number.NaN));
        taken.push(t);
        return t;
      };
      runRunsSync(plan, encodeInGroups(plan, sources, 0, groups, hidden, take));
      const got = new Float32Array(sources.length * S * D);
      plan.residentRead(hiddenBuf, 0, got);
      const { ids: x, mask } = sourceFeeds(sources, 0);
      const whole = plan.runSync('encoder', { input_ids: x, attention_mask: mask }).last_hidden_state!
        .data as Float32Array;
      sources.forEach((s, i) => {
        const row = got.subarray(i * S * D, (i + 1) * S * D);
        const own = whole.subarray(i * S * D, i * S * D + s.length * D);
        assert.ok(
          own.every((v, j) => Object.is(v, row[j])),
          `row ${i} (${s.length} tokens) differs from the batch encoded in one call`,
        );
        // positions past the row's group's longest are zeros; those inside it hold finite encoder values
        assert.ok(
          row.subarray(s.length * D).every((v) => Number.isFinite(v)),
          `row ${i}: padding not finite`,
        );
      });
      const [a, b] = groups[groups.length - 1]!;
      const len = Math.max(...sources.slice(a, b).map((s) => s.length));
      assert.ok(len < S);
      for (let i = a; i < b; i++) {
        const pad = got.subarray(i * S * D + len * D, (i + 1) * S * D);
        assert.ok(
          pad.every((v) => v === 0),
          `row ${i}: positions ${len}..${S - 1} not zero`,
        );
      }
    } finally {
      plan.close();
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test.run();
