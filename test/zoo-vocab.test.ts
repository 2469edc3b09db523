// Vocabulary rewriting on a zoo family with a forced bos (mbart): `optimize --vocab clusters=R,K` works with default
// options, and calibration and the quality report decode as the runtime's greedy decoding does (forced bos at the
// first step, forced eos at the last allowed one, banned ids never chosen, any eos ends).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_PROFILE } from '../codegen/profile.ts';
import { importModel } from '../model/onnx/import-model.ts';
import { calibrateIds, exposePlan } from '../optimize/vocab-calibrate.ts';
import { planRules, translateIds } from '../runtime/decode/translate-ids.ts';
import { kernelIds, nativeAvailable } from '../runtime/native.ts';
import { loadPlan } from '../runtime/plan.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, skipPart, testIf } from './helpers/skip.ts';
import { ZOO, zooReference } from './helpers/zoo.ts';

const dir = ZOO ? path.join(ZOO, 'mbart') : '';
const have = !!dir && fs.existsSync(path.join(dir, 'reference.json')) && nativeAvailable();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-zoo-vocab-'));
/** Calibration and evaluation caps: the runtime's with these options. */
const CAPS = { beamSize: 1, maxLengthRatio: 2, maxLengthConstant: 10 };

testIf(test, !have && (nativeAvailable() ? needsShared('models/zoo/mbart') : NEEDS_NATIVE))(
  'zoo mbart: optimize --vocab clusters with default options; calibration greedy = runtime greedy (forced bos applied)',
  async () => {
    const ref = zooReference('mbart');
    // Calibrated on the first 8 sources, evaluated on all 20 (so that the masks do miss some tokens).
    const text = path.join(tmp, 'src.es'),
      cal8 = path.join(tmp, 'cal.es');
    fs.writeFileSync(text, `${ref.src_text.join('\n')}\n`);
    fs.writeFileSync(cal8, `${ref.src_text.slice(0, 8).join('\n')}\n`);
    const out = path.join(tmp, 'mbart.vocab.plan');
    const r = planc(['optimize', dir, '-o', out, '--vocab', 'clusters=8,2', '--calibrate', cal8, '--eval-src', text]);
    assert.is(r.status, 0, r.stderr);
    assert.match(r.stdout, /vocab: clusters R 8, K 2, calibrated on 8 sentences/);
    assert.match(r.stdout, /on 20 held-out sentences/);

    // The same calibration in-process on a plan exposing the hidden state, against the runtime's greedy decoding of it.
    const profile = { ...DEFAULT_PROFILE, maxDims: { decoder_sequence_length: 1 } };
    const { plan: exposed } = exposePlan(importModel(dir), { topk: 8 }, { target: 'cpu', ...profile });
    const vocabPlan = await loadPlan(out);
    try {
      const rules = await planRules(exposed);
      assert.is(rules.c.forcedBosId, 977, 'mbart forces en_XX first');
      const cal = calibrateIds(exposed, ref.src_ids, 3, rules, profile.maxSrcLen, profile.maxTgtLen);
      const full = (await translateIds(exposed, ref.src_ids, CAPS)).map((x) => x.ids);
      assert.equal(cal.outputs, full, 'calibration decodes as translateIds does');
      assert.ok(
        full.every((ids) => ids[0] === 977),
        'every output starts with the forced bos',
      );
      // One calibration state per step whose token is not forced: not the bos step, nor the forced eos at the cap (a
      // sentence that reached it has cap - 1 tokens; one that stopped earlier had an unforced eos step).
      const cap = (i: number) => Math.min(profile.maxTgtLen, 2 * ref.src_ids[i]!.length + 10);
      assert.is(
        cal.states,
        full.reduce((n, ids, i) => n + ids.length - 1 + (ids.length < cap(i) - 1 ? 1 : 0), 0),
      );
      // The plan's emulated report (batch-1 masks) matches its native greedy decoding at batch 1.
      const v = vocabPlan.header.vocab!;
      assert.is(v.calibrationSentences, 8);
      if (!kernelIds().has('cluster_mask'))
        return skipPart('no cluster_mask kernel in this build', 'native cluster decoding');
      const viaClusters = (await translateIds(vocabPlan, ref.src_ids, { ...CAPS, batchSize: 1 })).map((x) => x.ids);
      assert.ok(viaClusters.every((ids) => ids[0] === 977));
      const same = viaClusters.filter((ids, i) => ids.join() === full[i]!.join()).length / full.length;
      console.log(
        `  zoo mbart clusters R 8 K 2 (8 calibration sentences): identical to full greedy ${(100 * same).toFixed(0)}% native batch 1, ${(100 * v.identicalSentences).toFixed(0)}% emulated; top-1 agreement ${(100 * v.top1Agreement).toFixed(1)}%`,
      );
      assert.ok(Math.abs(same - v.identicalSentences) <= 0.1, `native ${same} vs emulated ${v.identicalSentences}`);
    } finally {
      exposed.close();
      vocabPlan.close();
    }
  },
);

test.run();
