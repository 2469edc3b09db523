// `planc report`: the data of a tuned, int8-quantized tiny plan (every decision, layers, live bytes, timings), --json,
// and the self-contained page in headless Chromium (no console errors or requests, every decision on the page, charts
// drawn; screenshot test-output/report.png).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { liveBytes, reportData } from '../cli/report.ts';
import { DTYPE_CODE } from '../compiler/kernel-enums.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import { writePlanFile } from '../compiler/plan/format.ts';
import { TENSOR_KIND, type TensorKind } from '../compiler/plan/types.ts';
import { compile, type Compiled } from '../optimize/compile.ts';
import { renderReport, type ReportData } from '../pages/report.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { browserMissing, screenshot, withPage } from './helpers/browser.ts';
import { emptyVocab } from '../compiler/vocab/header.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-report-'));
const dir = path.join(tmp, 'model');
makeModel({
  arch: 'marian',
  d: 64,
  encoderLayers: 2,
  decoderLayers: 2,
  heads: 2,
  ffn: 128,
  vocab: 120,
  maxPos: 64,
  activation: 'relu',
  seed: 7,
  out: dir,
});
const planFile = path.join(tmp, 'tiny.plan');
const native = testIf(test, !nativeAvailable() && NEEDS_NATIVE);
const browser = testIf(test, (!nativeAvailable() && NEEDS_NATIVE) || browserMissing());

let built: Compiled;
let data: ReportData;

native(
  'report data: every tuning decision, each graph timed at both points, live bytes within the arena, layers',
  async () => {
    built = await compile(importSeq2SeqDir(dir), {
      target: 'cpu',
      maxBatch: 4,
      maxSrcLen: 8,
      maxTgtLen: 8,
      topk: 4,
      quantize: { mode: 'int8' },
      tune: { cacheFile: null, runs: 3, warmup: 1 },
    });
    writePlanFile(planFile, built.header, built.blob);
    data = reportData({ header: built.header, blob: built.blob }, 'tiny.plan', 2);
    assert.is(data.decisions.length, built.header.tuning.length);
    assert.ok(
      data.decisions.some((d) => d.kernel === 'qmatmul' || d.kernel === 'qproject_topk'),
      "the int8 products' SIMD paths are alternatives",
    );
    assert.ok(data.decisions.filter((d) => d.call !== null).every((d) => d.alternatives.length >= 2 && d.reason));
    for (const g of data.graphs) {
      assert.equal(
        g.timing.map((t) => t.point.split(',')[0]),
        ['batch 1', 'batch 4'],
      );
      assert.ok(g.timing.every((t) => t.runMs > 0 && t.byOp.length > 0));
      assert.ok(
        Math.max(...g.live) <= g.tensorBytesSum && Math.max(...g.live) > 0,
        `${g.graph}: live bytes within all tensors`,
      );
    }
    assert.ok(
      data.quantization &&
        data.quantization.layers.length > 0 &&
        data.quantization.layers.every((l) => l.precision === 'int8'),
    );
    assert.equal(data.conventions.eosId, built.header.decoding.eosId);
  },
);

test('live bytes: a tensor counts from its first write to its last read, graph outputs to the end', () => {
  const t = (kind: TensorKind, slotBytes: number) => ({
    name: '',
    kind,
    dtype: DTYPE_CODE.float32!,
    dims: [],
    offset: 0,
    slotBytes,
    ref: 0,
  });
  const k = (inputs: number[], outputs: number[]) => ({
    name: 'add',
    inputs,
    outputs,
    iargs: [],
    fargs: [],
    node: '',
    origin: [],
  });
  const p = {
    graph: 'g',
    symbols: [],
    exprs: [],
    arenaBytes: 0,
    arenaLowerBound: 0,
    tensorBytesSum: 0,
    fusedOps: {},
    inputs: [{ name: 'x', tensor: 0 }],
    outputs: [{ name: 'y', tensor: 3 }],
    tensors: [t(TENSOR_KIND.INPUT, 0), t(TENSOR_KIND.ARENA, 10), t(TENSOR_KIND.ARENA, 100), t(TENSOR_KIND.ARENA, 1000)],
    kernels: [k([0], [1]), k([1], [2]), k([2], [3]), k([0], [0])],
  };
  assert.equal(liveBytes(p), [10, 110, 1100, 1000]);
});

browser('the page loads in headless Chromium without errors, shows every decision and draws its charts', async () => {
  const out = path.join(REPO_ROOT, 'test-output', 'report.html');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, renderReport(data));
  const html = fs.readFileSync(out, 'utf8');
  assert.not.match(html, /<script[^>]+src=|<link[^>]+href=/, 'nothing loaded from elsewhere');
  await withPage(out, async ({ page, problems }) => {
    const keys = await page.$$eval('tr[data-key]', (rows) => rows.map((r) => r.getAttribute('data-key')));
    assert.equal([...keys].sort(), data.decisions.map((d) => d.key).sort(), 'every decision has its row');
    const drawn = await page.$$eval('canvas', (cs) =>
      cs.map((c) => ({
        id: c.id,
        drawn:
          (c as HTMLCanvasElement).width > 0 &&
          !!(window as unknown as { Chart: { getChart(c: unknown): unknown } }).Chart.getChart(c),
      })),
    );
    // the end-to-end confirmation chart is there only when tuning changed a graph (measured: either may happen)
    const want = [
      'chart-graphs',
      'chart-ops',
      'chart-variants',
      ...(data.decisions.some((d) => d.call === null) ? ['chart-confirm'] : []),
      'chart-precision',
      'chart-memory',
    ];
    assert.equal(drawn.map((d) => d.id).sort(), want.sort(), `charts: ${drawn.map((d) => d.id).join(', ')}`);
    assert.ok(
      drawn.every((d) => d.drawn),
      `every chart drawn: ${JSON.stringify(drawn)}`,
    );
    await screenshot(page, path.join(REPO_ROOT, 'test-output', 'report.png'));
    assert.equal(problems, [], 'no console errors, page errors or requests');
  });
});

browser(
  "the vocabulary section: --vocab auto's R × K curve as a chart and a table, the chosen point marked (a curve put into the tiny plan's header: the page is under test here, the measurement in vocab-rewrite.test.ts)",
  async () => {
    const point = (clusters: number, topK: number, identical: number, activeMean: number) => ({
      clusters,
      topK,
      activeMean,
      activeMax: 2 * activeMean,
      top1Agreement: 0.99,
      identicalSentences: identical,
      bleu: 3.4,
      gatePassed: identical >= 0.97,
      cost: clusters + activeMean * 120,
    });
    const vocab = {
      ...emptyVocab('clusters'),
      clusters: 16,
      topK: 8,
      evalSentences: 40,
      evalSource: 'dev.es',
      choice: 'R 16 K 8: the cheapest of 2 of 3 points that hold the gate',
      curve: [point(16, 2, 0.9, 0.05), point(16, 8, 0.975, 0.1), point(32, 8, 0.99, 0.08)],
    };
    const d = reportData({ header: { ...built.header, vocab }, blob: built.blob }, 'tiny-vocab.plan');
    assert.is(d.vocabCurve!.filter((p) => p.chosen).length, 1);
    const out = path.join(REPO_ROOT, 'test-output', 'report-vocab.html');
    fs.writeFileSync(out, renderReport(d));
    await withPage(out, async ({ page, problems }) => {
      const rows = await page.$$eval('#vocab table tr', (trs) => trs.map((t) => t.textContent ?? ''));
      assert.is(rows.filter((r) => /holds|fails/.test(r)).length, 3, rows.join('\n'));
      assert.is(rows.filter((r) => /chosen/.test(r)).length, 1);
      const drawn = await page.$eval(
        '#chart-vocab',
        (c) => !!(window as unknown as { Chart: { getChart(c: unknown): unknown } }).Chart.getChart(c),
      );
      assert.ok(drawn, 'the R × K chart is drawn');
      await screenshot(page, path.join(REPO_ROOT, 'test-output', 'report-vocab.png'));
      assert.equal(problems, [], 'no console errors, page errors or requests');
    });
  },
);

native('planc report --json prints the data; -o writes the page', () => {
  const r = planc(['report', planFile, '--json', '--runs', '1']);
  assert.is(r.status, 0, r.stderr);
  const j = JSON.parse(r.stdout) as ReportData;
  assert.equal(
    j.decisions.map((d) => d.key),
    data.decisions.map((d) => d.key),
  );
  const html = path.join(tmp, 'r.html');
  const w = planc(['report', planFile, '-o', html, '--no-profile']);
  assert.is(w.status, 0, w.stderr);
  assert.match(fs.readFileSync(html, 'utf8'), /Tuning decisions/);
  assert.is(planc(['report', planFile, '--json', '-o', html]).status, 2);
});

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
