// A sentence gets the same bits alone or in a batch (es-en, float32 and int8 plans): the encoder output of a sentence
// padded by longer batch-mates equals its output alone bit for bit, and greedy translation at batch 32 equals batch 1
// on the 1,000 test sentences (int8: 997/1000 before attention's sums stopped at a row's last unmasked key).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sharedDir } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan } from '../runtime/plan.ts';
import { sourceFeeds } from '../runtime/decode/source-feeds.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, testIf } from './helpers/skip.ts';

const ESEN = sharedDir() && path.join(sharedDir()!, 'models', 'es-en');
const withShared = testIf(test, (!nativeAvailable() && NEEDS_NATIVE) || (!ESEN && needsShared('models/es-en')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-batch-inv-'));
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** An es-en plan at batch 32 (float32, or with --quantize). */
function esenPlan(quantize?: string): string {
  const file = path.join(tmp, `${quantize ?? 'fp32'}.plan`);
  const args = ['optimize', ESEN!, '-o', file, '--quiet', '--max-batch', '32', '--max-tgt-len', '64'];
  const r = planc(quantize ? [...args, '--quantize', quantize] : args);
  assert.is(r.status, 0, r.stderr);
  return file;
}

const testIds = (): number[][] =>
  JSON.parse(fs.readFileSync(path.join(ESEN!, 'test_ids.json'), 'utf8')).src_ids.slice(0, 1000);

withShared(
  'es-en encoder: a sentence padded by 1..20 positions in a batch gives its own output bit for bit',
  async () => {
    const ids = testIds();
    for (const q of [undefined, 'int8']) {
      const plan = await loadPlan(esenPlan(q));
      try {
        const encode = (srcs: number[][]) => {
          const { ids: x, mask } = sourceFeeds(srcs, 0);
          return plan.runSync('encoder', { input_ids: x, attention_mask: mask }).last_hidden_state!;
        };
        for (const s of [ids[185]!, ids[411]!, ids[3]!]) {
          const alone = encode([s]).data as Float32Array;
          for (const pad of [1, 5, 20]) {
            const longer = Array.from({ length: s.length + pad }, (_, j) => 5 + j);
            const batch = encode([s, longer]).data as Float32Array;
            const same = alone.every((v, i) => Object.is(v, batch[i]));
            assert.ok(same, `${q ?? 'fp32'}: a sentence of ${s.length} tokens padded by ${pad}`);
          }
        }
      } finally {
        plan.close();
      }
    }
  },
);

withShared('es-en int8: greedy at batch 32 equals batch 1 on the 1,000 test sentences', async () => {
  const plan = await loadPlan(esenPlan('int8'));
  try {
    const ids = testIds();
    const one = await translateIds(plan, ids, { batchSize: 1, maxLength: 64 });
    const many = await translateIds(plan, ids, { batchSize: 32, maxLength: 64 });
    const differ = one.flatMap((r, i) => (r.ids.join(' ') === many[i]!.ids.join(' ') ? [] : [i]));
    assert.equal(differ, [], 'sentences whose batch-32 translation differs from batch 1');
  } finally {
    plan.close();
  }
});

test.run();
