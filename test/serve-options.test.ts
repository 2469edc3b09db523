// POST /v1/translate with generate()'s beam and processor options (earlyStopping, lengthPenalty, noRepeatNgramSize,
// ...): answered as translate() with the same DecodingOptions; a bad value is a 400 naming the field.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { translate } from '../runtime/translate.ts';
import { createServer, type PlancServer } from '../serve/server.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';
import { makeTinyTextPlan } from './helpers/tiny-text-plan.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-serve-options-'));
let plan: Plan;
let server: PlancServer;
let url = '';

const post = async (body: object) => {
  const res = await fetch(`${url}/v1/translate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    body: (await res.json()) as {
      translations?: { text: string; score?: number }[];
      error?: { code: string; message: string };
    },
  };
};

testIf(test, !nativeAvailable() && NEEDS_NATIVE)(
  'generate() options per request: the same as translate() with them; bad values named',
  async () => {
    plan = await loadPlan(makeTinyTextPlan(tmp));
    server = await createServer([plan], { port: 0, logger: false });
    url = await server.listen();
    try {
      const texts = ['w5 w7 w9 w11', 'w3', 'w20 w21 w22 w23 w24 w25 w26'];
      let changed = 0; // the options must matter here, or the check below could not fail
      for (const options of [
        { beam: 3, earlyStopping: 'never' as const, lengthPenalty: 0.5 },
        { beam: 2, earlyStopping: true, noRepeatNgramSize: 2, minNewTokens: 3 },
        { beam: 3, encoderNoRepeatNgramSize: 2, scores: true },
      ]) {
        const { beam, scores, ...rest } = options as { beam: number; scores?: boolean } & Record<string, unknown>;
        const want = await translate(plan, texts, { beamSize: beam, ...rest });
        const plain = await translate(plan, texts, { beamSize: beam });
        changed += want.filter((t, i) => t !== plain[i]).length;
        const r = await post({ text: texts, options });
        assert.is(r.status, 200, JSON.stringify(r.body));
        assert.equal(
          r.body.translations!.map((t) => t.text),
          want,
          JSON.stringify(options),
        );
        if (scores) assert.ok(r.body.translations!.every((t) => Number.isFinite(t.score)));
      }
      assert.ok(changed > 0, 'the options change some translation of the tiny model');
      // sampling: a request's samples are translate()'s with the same seed (sentence i draws from (seed, i)), whatever
      // else the server decodes beside it; another seed samples something else
      const sampling = { doSample: true, temperature: 1.5, topK: 5, topP: 0.95 }; // topK under the tiny plan's k (8): exact
      const sampled = async (seed: number) => {
        const [r, other] = await Promise.all([
          post({ text: texts, options: { ...sampling, seed } }),
          post({ text: ['w9 w9', 'w4 w6'], options: { ...sampling, seed: seed + 1 } }),
        ]);
        assert.is(r.status, 200, JSON.stringify(r.body));
        assert.is(other.status, 200, JSON.stringify(other.body));
        return r.body.translations!.map((t) => t.text);
      };
      for (const seed of [1, 2])
        assert.equal(await sampled(seed), await translate(plan, texts, { ...sampling, seed }), `seed ${seed}`);
      let differ = false;
      for (let seed = 3; seed < 8 && !differ; seed++)
        differ = (await sampled(seed)).join('\n') !== (await sampled(1)).join('\n');
      assert.ok(differ, 'some other seed samples another translation');
      let r = await post({ text: 'w5', options: { earlyStopping: 'sometimes' } });
      assert.is(r.status, 400);
      assert.match(r.body.error!.message, /body\.options\.earlyStopping/);
      r = await post({ text: 'w5', options: { repetitionPenalty: 0 } });
      assert.is(r.status, 400);
      assert.match(r.body.error!.message, /repetitionPenalty/);
      r = await post({ text: 'w5', options: { doSample: true, temperature: 0 } });
      assert.is(r.status, 400);
      assert.match(r.body.error!.message, /body\.options\.temperature/);
    } finally {
      await server.close();
      plan.close();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  },
);

test.run();
