// DDGviz: the Jacobi trace (runtime/decode/jacobi-trace.ts) on a hand-checked draft sequence and on a tiny model (the
// trace replays to greedy's tokens), the page's escaping, the CLI options, and 20 es-en sentences decoded with pgj(3),
// rendered and loaded in headless Chromium (no console errors, 20 sentences, graph arcs; screenshot test-output/ddgviz.png).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ddgvizRecorder } from '../cli/ddgviz.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { renderDdgviz } from '../pages/ddgviz.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { onJacobiStats, type JacobiBatchStats } from '../runtime/decode/jacobi.ts';
import {
  dependencies,
  JacobiTraceCollector,
  JacobiTraceRecorder,
  traceTotals,
  type JacobiSentenceTrace,
} from '../runtime/decode/jacobi-trace.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { before } from './helpers/before.ts';
import { browserMissing, screenshot, withPage } from './helpers/browser.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, skipSuite, testIf } from './helpers/skip.ts';

/** A hand-made decode of 4 positions (pad 0): final tokens 5 6 7 2, the guess 9 at position 2 corrected at iteration 3. */
function handTrace(): JacobiSentenceTrace {
  const row = { cap: 4, draft: [0, 0, 0, 0], fixed: 0, done: false };
  const rec = new JacobiTraceRecorder('pj', 8, [[3, 4, 0]], [row]);
  const run = (start: number, fed: number, tokens: number[], fixed: number, done = false) => {
    tokens.forEach((t, k) => (row.draft[start + k] = t));
    row.fixed = fixed;
    row.done = done;
    rec.record(row, start, fed);
  };
  run(0, 1, [5], 1); // 1: the start token gives position 0
  run(1, 3, [6, 9, 2], 2); // 2: positions 1..3 from the pad guesses; 6 exact
  run(2, 2, [7, 2], 3); // 3: 9 → 7 (exact: it saw 5 6); 2 unchanged but conditioned on 9
  run(3, 1, [2], 4, true); // 4: 2 confirmed, eos final
  return rec.finish()[0]!;
}

test('trace: drafts, fixed-at iterations and the dependency graph of a hand-checked decode', () => {
  const t = handTrace();
  assert.equal(t.tokens, [5, 6, 7, 2]);
  assert.equal(t.source, [3, 4, 0]);
  assert.is(t.iterations, 4);
  assert.equal(t.fixedAt, [1, 2, 3, 4]);
  assert.equal(
    t.drafts.map((d) => d.changed),
    [[0], [1, 2, 3], [2], []],
  );
  assert.equal(
    t.drafts.map((d) => [d.start, d.tokens, d.fixed]),
    [
      [0, [5], 1],
      [1, [6, 9, 2], 2],
      [2, [7, 2], 3],
      [3, [2], 4],
    ],
  );
  // iteration 2: 1, 2, 3 changed after 0 changed; iteration 3: 2 changed after 1 (and 2, not earlier) changed
  assert.equal(t.edges, [
    { from: 1, to: 0, iteration: 2, settles: true },
    { from: 2, to: 0, iteration: 2, settles: false },
    { from: 2, to: 1, iteration: 3, settles: true },
    { from: 3, to: 0, iteration: 2, settles: true },
  ]);
  assert.equal(traceTotals([t, t]), { sentences: 2, iterations: 8, tokens: 8 });
  // positions past the final tokens are left out of the graph
  assert.equal(dependencies(t.drafts, 2), [{ from: 1, to: 0, iteration: 2, settles: true }]);
});

test('trace collector: traces back in input order by their sources (duplicates, truncated sources, empty ones)', () => {
  const c = new JacobiTraceCollector();
  const mk = (source: number[], tokens: number[]) => ({ ...handTrace(), source, tokens });
  [mk([7, 7, 0], [1]), mk([1, 0], [2]), mk([1, 0], [3]), mk([4, 5, 0], [4])].forEach(c.listener);
  const got = c.inInputOrder([[1, 0], [], [4, 5, 6, 9, 0], [7, 7, 0], [1, 0]]);
  assert.equal(
    got.map((t) => t?.tokens[0]),
    [2, undefined, 4, 1, 3],
  );
});

test('page: every text escaped, totals, one collapsible section per sentence', () => {
  const t = handTrace();
  const nasty = ['<zz>', 'a & b', '"q"', "it's"];
  const html = renderDdgviz([t, t], {
    tokenText: (id) => nasty[[5, 6, 7, 2].indexOf(id)] ?? '',
    sources: ['<script>alert(1)</script>', undefined],
    plan: 'x<y>.plan',
  });
  assert.not.match(html, /<zz>|<script>alert|x<y>/);
  assert.match(html, /&lt;zz&gt;/);
  assert.match(html, /a &amp; b/);
  assert.match(html, /&quot;q&quot;/);
  assert.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
  assert.is(html.match(/<details class="sentence"/g)?.length, 2);
  assert.is(html.match(/<path class="edge/g)?.length, 8);
  assert.not.match(html, /https?:\/\/(?!www\.w3\.org\/2000\/svg)/, 'nothing fetched');
  assert.match(html, /<b>8<\/b><span>tokens/);
});

// ---- a tiny model: the trace of every sentence replays to greedy's tokens ----

const tiny = testIf(test, !nativeAvailable() && NEEDS_NATIVE);
let plan: Plan, planFile: string, sources: number[][];
if (nativeAvailable()) {
  before(test, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-ddgviz-'));
    makeModel({
      arch: 'marian',
      d: 64,
      encoderLayers: 1,
      decoderLayers: 2,
      heads: 4,
      ffn: 128,
      vocab: 40,
      maxPos: 96,
      activation: 'relu',
      seed: 11,
      out: dir,
    });
    const built = buildPlan(runPipeline(importSeq2SeqDir(dir), { stepTokens: 8 }), {
      target: 'cpu',
      maxBatch: 4,
      maxSrcLen: 24,
      maxTgtLen: 48,
    });
    const bytes = encodePlan(built.header, built.blob);
    planFile = path.join(dir, 'jacobi.plan');
    fs.writeFileSync(planFile, bytes);
    plan = loadPlanBytes(bytes, 'jacobi.plan');
    sources = Array.from({ length: 12 }, (_, i) => [
      ...Array.from({ length: 3 + (i % 9) }, (_, j) => 1 + ((i * 13 + j * 7) % 39)),
      0,
    ]);
  });
}

tiny(
  "tiny model: pj, pgj(3), hgj(3) traces replay to greedy's tokens; fixed-at and arcs are consistent; batch 1 and 4",
  async () => {
    const caps = { maxLength: 40, maxLengthRatio: 1.5, maxLengthConstant: 2 };
    const greedy = await translateIds(plan, sources, caps);
    for (const strategy of ['pj', 'pgj', 'hgj']) {
      for (const batchSize of [1, 4]) {
        const c = new JacobiTraceCollector();
        const stats: JacobiBatchStats[] = [];
        onJacobiStats((s) => stats.push(s));
        try {
          await translateIds(plan, sources, { ...caps, strategy, batchSize, jacobiTrace: c.listener });
        } finally {
          onJacobiStats(undefined);
        }
        const traces = c.inInputOrder(sources);
        const what = `${strategy} batch ${batchSize}`;
        assert.is(traces.length, sources.length);
        assert.equal(
          traceTotals(c.traces).iterations,
          stats.flatMap((b) => b.sentences).reduce((a, s) => a + s.iterations, 0),
          `${what}: iterations = the stats'`,
        );
        traces.forEach((t, i) => {
          assert.ok(t, `${what}: sentence ${i} traced`);
          assert.equal(t!.source, sources[i]);
          assert.equal(
            t!.tokens.filter((id) => id !== 0),
            greedy[i]!.ids,
            `${what} sentence ${i}: tokens`,
          );
          assert.is(t!.drafts.length, t!.iterations);
          assert.is(t!.fixedAt.length, t!.tokens.length);
          assert.is(
            t!.fixedAt[t!.fixedAt.length - 1],
            t!.iterations,
            `${what}: the last token is fixed by the last iteration`,
          );
          t!.fixedAt.forEach((it, q) => {
            assert.ok(q === 0 || it >= t!.fixedAt[q - 1]!, `${what}: fixed-at never decreases`);
            const d = t!.drafts[it - 1]!;
            assert.ok(
              d.fixed > q && q >= d.start && d.tokens[q - d.start] === t!.tokens[q],
              `${what} sentence ${i}: position ${q} is final, with its token, in the draft of iteration ${it}`,
            );
          });
          // replaying the drafts from the pad guesses gives the final tokens, and `changed` lists exactly what a run changed
          const draft: number[] = [];
          for (const d of t!.drafts) {
            const changed = d.tokens.flatMap((tok, k) => (tok !== (draft[d.start + k] ?? 0) ? [d.start + k] : []));
            assert.equal(d.changed, changed, `${what}: changed at iteration ${d.iteration}`);
            d.tokens.forEach((tok, k) => (draft[d.start + k] = tok));
          }
          assert.equal(draft.slice(0, t!.tokens.length), t!.tokens);
          for (const e of t!.edges) {
            assert.ok(e.to < e.from && e.from < t!.tokens.length, `${what}: arc ${e.from} → ${e.to}`);
            assert.ok(
              t!.drafts[e.iteration - 1]!.changed.includes(e.from) &&
                t!.drafts[e.iteration - 2]!.changed.includes(e.to),
              `${what}: arc ${e.from} → ${e.to} at iteration ${e.iteration} follows the definition`,
            );
          }
        });
        assert.ok(
          c.traces.some((t) => t.edges.length > 0),
          `${what}: some arcs`,
        );
      }
    }
    // greedy ignores the listener (nothing to trace)
    const c = new JacobiTraceCollector();
    await translateIds(plan, sources.slice(0, 2), { maxLength: 10, jacobiTrace: c.listener });
    assert.is(c.traces.length, 0);
  },
);

tiny('planc translate --ddgviz: a page for a pgj run; refused with greedy, naming --ddgviz', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-ddgviz-cli-'));
  const page = path.join(dir, 'run.html');
  const input =
    sources
      .slice(0, 5)
      .map((s) => s.join(' '))
      .join('\n') + '\n';
  const ok = planc(
    ['translate', planFile, '--ids', '--max-length', '20', '--strategy', 'pgj', '--ddgviz', page, '--quiet'],
    input,
  );
  assert.is(ok.status, 0, ok.stderr);
  assert.is(ok.stdout.trim().split('\n').length, 5);
  const html = fs.readFileSync(page, 'utf8');
  assert.is(html.match(/<details class="sentence"/g)?.length, 5);
  const bad = planc(['translate', planFile, '--ids', '--ddgviz', page, '--quiet'], input);
  assert.is(bad.status, 2);
  assert.match(bad.stderr, /PLANC_E301.*--ddgviz.*--strategy pj, pgj or hgj/);
  const beam = planc(['translate', planFile, '--ids', '--strategy', 'beam', '--ddgviz', page, '--quiet'], input);
  assert.match(beam.stderr, /PLANC_E301.*--ddgviz.*got 'beam'/);
  const noSrc = planc(['ddgviz', planFile]);
  assert.is(noSrc.status, 2);
  assert.match(noSrc.stderr, /PLANC_E301.*--src/);
});

// ---- es-en: 20 test sentences with pgj(3), drawn and loaded in Chromium ----

const ES_EN =
  'es-en pgj(3): DDGviz of 20 test sentences loads in headless Chromium without errors, shows 20 sentences and graph arcs';
const shared = sharedDir();
const esen = shared ? path.join(shared, 'models', 'es-en') : '';
const noBrowser = browserMissing();
if (!esen || !fs.existsSync(esen)) skipSuite(test, needsShared('models/es-en'), [ES_EN]);
else if (!nativeAvailable()) skipSuite(test, NEEDS_NATIVE, [ES_EN]);
else if (noBrowser) skipSuite(test, noBrowser, [ES_EN]);
else {
  test(ES_EN, async () => {
    const data = JSON.parse(fs.readFileSync(path.join(esen, 'test_ids.json'), 'utf8')) as {
      src_ids: number[][];
      src_text: string[];
    };
    const ids = data.src_ids.slice(0, 20);
    const tokenizer = {
      bytes: new Uint8Array(fs.readFileSync(path.join(esen, 'vocab.esen.spm'))),
      kind: 'spm' as const,
    };
    const built = buildPlan(runPipeline(importSeq2SeqDir(esen), { stepTokens: 8, topk: TRANSLATE_TOPK }), {
      target: 'cpu',
      maxBatch: 1,
      maxSrcLen: Math.max(...ids.map((s) => s.length)),
      maxTgtLen: 64,
      tokenizer,
    });
    const p = loadPlanBytes(encodePlan(built.header, built.blob), 'es-en-8.plan');
    const out = path.join(REPO_ROOT, 'test-output', 'ddgviz.html');
    fs.mkdirSync(path.dirname(out), { recursive: true });
    try {
      const o = { strategy: 'pgj', batchSize: 1, maxLength: 64 };
      const greedy = await translateIds(p, ids, { batchSize: 1, maxLength: 64 });
      const recorder = ddgvizRecorder(out, o);
      const got = await translateIds(p, ids, o);
      assert.equal(
        got.map((r) => r.ids),
        greedy.map((r) => r.ids),
        'pgj = greedy',
      );
      assert.is(await recorder.write(p, ids, data.src_text.slice(0, 20)), 20);
    } finally {
      p.close();
    }
    const html = fs.readFileSync(out, 'utf8');
    assert.match(html, /Campo de Cebada/, 'the first source text');
    await withPage(out, async ({ page, problems }) => {
      assert.is(await page.locator('details.sentence').count(), 20, 'sentences shown');
      assert.is(
        await page.locator('details.sentence > summary:visible').count(),
        20,
        'every sentence has a visible summary line',
      );
      const open = page.locator('details.sentence[open]');
      assert.is(await open.count(), 1, 'the first sentence is open');
      assert.ok((await open.locator('svg.ddg path.edge').count()) > 0, "the open sentence's graph has arcs");
      assert.ok((await page.locator('svg.ddg path.edge').count()) >= 20, 'graphs have arcs');
      assert.ok((await open.locator('svg.ddg').boundingBox())!.height > 50, 'the graph is drawn');
      await page.locator('button[data-all="open"]').click();
      assert.is(await page.locator('details.sentence[open]').count(), 20, 'expand all opens every sentence');
      await page.locator('button[data-all="close"]').click();
      // the screenshot: the first sentence and the most parallel one open
      await page.evaluate(`(() => {
        const all = [...document.querySelectorAll('details.sentence')];
        const speed = (d) => Number(/×([\\d.]+)/.exec(d.querySelector('.stat').textContent)[1]);
        const best = all.slice(1).reduce((a, d) => (speed(d) > speed(a) ? d : a), all[1]);
        all[0].open = true;
        best.open = true;
      })()`); // a string: tsx's helpers do not exist in the page
      await page.locator('details.sentence[open] svg.ddg .node circle').nth(3).hover();
      await screenshot(page, path.join(REPO_ROOT, 'test-output', 'ddgviz.png'));
      assert.equal(problems, [], 'no console errors, page errors or requests');
    });
  });
}

test.run();
