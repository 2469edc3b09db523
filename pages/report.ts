// The plan report: one self-contained HTML page (inline CSS, data and Chart.js, nothing fetched) showing where time
// goes per graph and per op, every tuning decision with its alternatives' times and reason, precision per layer with
// its measured error, the vocabulary rewrite's quality, the memory arena over each program, the machine, the plan's
// conventions. ReportData is also what `planc report --json` prints.
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import type { PlanFast, PlanVocabPoint } from '../compiler/plan/types.ts';
import { escapeHtml } from './ddgviz.ts';

/** One graph's timing at one operating point: the whole run and its time per op kind and per call (ms). */
export interface GraphTiming {
  point: string;
  runMs: number;
  byOp: { op: string; ms: number }[];
  top: { call: number; kernel: string; node: string; variant: string; ms: number }[];
}

export interface ReportGraph {
  graph: string;
  kernels: number;
  arenaBytes: number;
  arenaLowerBound: number;
  tensorBytesSum: number;
  /** Arena bytes live while each kernel call runs (tensors from their first write to their last read). */
  live: number[];
  timing: GraphTiming[];
}

export interface ReportDecision {
  key: string;
  graph: string;
  call: number | null;
  kernel: string;
  choice: string;
  micros: number;
  reason: string;
  alternatives: { variant: string; micros: number; spread: number; note: string }[];
}

export interface ReportData {
  plan: string;
  plancVersion: string;
  target: string;
  created: string;
  profile: { maxBatch: number; maxSrcLen: number; maxTgtLen: number };
  weights: { tensors: number; bytes: number };
  /** The machine the timings were taken on (absent: not profiled), and the device the plan was tuned on. */
  machine?: Record<string, string | number>;
  tunedOn?: string;
  graphs: ReportGraph[];
  decisions: ReportDecision[];
  quantization?: {
    mode: string;
    gate: string;
    gatePassed: boolean;
    top1Agreement: number;
    identicalSentences: number;
    evalSentences: number;
    weightBytes: number;
    weightBytesFp32: number;
    layers: { graph: string; node: string; op: string; precision: string; error: number; reason: string }[];
  };
  vocab?: Record<string, string | number | boolean>;
  /** --vocab auto's measured R × K points (the quality/speed curve), the chosen one marked. */
  vocabCurve?: (PlanVocabPoint & { chosen: boolean })[];
  /** planc optimize --fast: every rung × vocabulary point measured against float32, and the choice. */
  fast?: PlanFast;
  conventions: Record<string, unknown>;
}

/** Chart.js's UMD build, inlined into the page (its package exports only the module builds; the UMD file sits beside them). */
const CHART_JS = (): string =>
  fs.readFileSync(
    path.join(path.dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.min.js'),
    'utf8',
  );

const mb = (b: number) => `${(b / 1e6).toFixed(2)} MB`;
const fmtMs = (ms: number) => (ms >= 10 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3));
/** Data for a <script type="application/json">: no `</` that could close it. */
const scriptJson = (x: unknown) => JSON.stringify(x).replace(/</g, '\\u003c');

const STYLE = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
header{background:#1d2330;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px;font-weight:600} header .sub{color:#b9c1d0;font-size:13px}
main{padding:8px 28px 40px;max-width:1400px}
section{background:#fff;border-radius:8px;box-shadow:0 1px 3px #0002;padding:14px 20px;margin:16px 0}
h2{font-size:17px;margin:4px 0 10px} h3{font-size:14px;margin:14px 0 6px;color:#39424f}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:18px}
.chart{position:relative;height:280px} .chart.tall{height:360px}
table{border-collapse:collapse;width:100%;font-size:13px} th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e6e8ec;vertical-align:top}
th{color:#5b6472;font-weight:600;background:#fafbfc} td.num{text-align:right;font-variant-numeric:tabular-nums}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;font-size:13px} .kv b{color:#5b6472;font-weight:600}
.pill{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;background:#e8eefc;color:#2446a8}
.pill.changed{background:#dff5e6;color:#18703a} .pill.rolled{background:#fde8e8;color:#a32020} .pill.na{background:#eee;color:#777}
tr.chosen td{background:#eaf6ee} .decisions td{padding:3px 6px} .decisions td.alt{min-width:64px;font-size:12px;font-variant-numeric:tabular-nums} .decisions td.chosen{font-weight:600}
.bar{height:5px;border-radius:2px;background:#9fb3d9;margin-top:1px} .bar.win{background:#2e9d57} .bar.none{background:repeating-linear-gradient(45deg,#ccc 0 3px,#f4f4f4 3px 6px)}
.muted{color:#717a88} .reason{font-size:11.5px;color:#4a5361;max-width:620px;line-height:1.3}
details summary{cursor:pointer;color:#2446a8;margin:6px 0}
`;

/** One alternative's cell: its time over a bar scaled to the row's slowest (green: chosen; hatched: could not run). */
function altCell(d: ReportDecision, variant: string): string {
  const a = d.alternatives.find((x) => x.variant === variant);
  if (!a) return '<td></td>';
  const max = Math.max(1e-9, ...d.alternatives.map((x) => x.micros));
  const ran = !a.note && a.micros > 0;
  const label = ran ? fmtMs(a.micros / 1000) : 'n/a';
  const tip = ran ? `${label} ms median (spread ${fmtMs(a.spread / 1000)} ms)` : a.note;
  const cls = ran ? (variant === d.choice ? 'win' : '') : 'none';
  return `<td class="alt${variant === d.choice ? ' chosen' : ''}" title="${escapeHtml(tip)}"><span>${label}</span><div class="bar ${cls}" style="width:${ran ? Math.max(3, (100 * a.micros) / max) : 100}%"></div></td>`;
}

function decisionRow(d: ReportDecision, variants: string[]): string {
  const base = d.alternatives.find((a) => a.variant === 'auto' || a.variant === 'untuned');
  const cls =
    /rolled back/.test(d.reason) || d.choice === 'untuned'
      ? 'rolled'
      : d.choice !== 'auto' && d.choice !== 'tuned'
        ? 'changed'
        : '';
  const gain =
    base && base.micros > 0 && d.micros > 0 && base.variant !== d.choice
      ? `<span class="muted"> ${((1 - d.micros / base.micros) * 100).toFixed(0)}%</span>`
      : '';
  return `<tr data-key="${escapeHtml(d.key)}"><td><code>${escapeHtml(d.key)}</code></td><td><span class="pill ${cls}">${escapeHtml(d.choice)}</span>${gain}</td>${variants.map((v) => altCell(d, v)).join('')}<td class="reason">${escapeHtml(d.reason)}</td></tr>`;
}

/** Decisions grouped by their alternatives (one table per variant set: GEMM paths, quantized paths, graphs). */
function decisionTables(ds: ReportDecision[]): string {
  const groups = new Map<string, ReportDecision[]>();
  for (const d of ds) {
    const sig = d.alternatives.map((a) => a.variant).join(',');
    groups.set(sig, [...(groups.get(sig) ?? []), d]);
  }
  return [...groups]
    .map(([sig, rows]) => {
      const variants = sig ? sig.split(',') : [];
      const kernels = [...new Set(rows.map((r) => r.kernel || 'graph'))].join(', ');
      return `<h3>${escapeHtml(kernels)} · ${rows.length} decision${rows.length > 1 ? 's' : ''} <span class="muted">(ms per alternative, summed over the points)</span></h3><table class="decisions"><tr><th>call</th><th>choice</th>${variants.map((v) => `<th>${escapeHtml(v)}</th>`).join('')}<th>why</th></tr>${rows.map((r) => decisionRow(r, variants)).join('')}</table>`;
    })
    .join('');
}

/** The vocabulary rewrite: its facts, and with --vocab auto the measured R × K curve (chart and table). */
function vocabSection(data: ReportData): string {
  if (!data.vocab)
    return '<section id="vocab"><h2>Vocabulary rewrite</h2><p class="muted">None: the output projection scores the whole vocabulary (planc optimize --vocab shortlist=FILE, clusters=R,K or auto).</p></section>';
  const curve = data.vocabCurve ?? [];
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const table = curve.length
    ? `<h3>R × K points measured (--vocab auto)</h3><div class="chart"><canvas id="chart-vocab"></canvas></div><table><tr><th>R</th><th>K</th><th>active mean</th><th>active max</th><th>top-1</th><th>identical</th><th>BLEU</th><th>dot products a row</th><th>gate</th></tr>${curve.map((p) => `<tr${p.chosen ? ' class="chosen"' : ''}><td class="num">${p.clusters}</td><td class="num">${p.topK}</td><td class="num">${pct(p.activeMean)}</td><td class="num">${pct(p.activeMax)}</td><td class="num">${pct(p.top1Agreement)}</td><td class="num">${pct(p.identicalSentences)}</td><td class="num">${p.bleu.toFixed(2)}</td><td class="num">${p.cost.toFixed(0)}</td><td>${p.gatePassed ? 'holds' : 'fails'}${p.chosen ? ' · <b>chosen</b>' : ''}</td></tr>`).join('')}</table>`
    : '<p class="muted">One point (--vocab clusters=R,K or a shortlist); planc optimize --vocab auto measures the R × K curve under the accuracy gate and records it here.</p>';
  return `<section id="vocab"><h2>Vocabulary rewrite</h2>${kvTable(data.vocab)}${table}</section>`;
}

function decisionsSection(data: ReportData): string {
  if (!data.decisions.length)
    return `<section id="tuning"><h2>Tuning decisions</h2><p class="muted">This plan was not tuned (planc tune PLAN, or planc optimize --tune): every call with variants runs <code>auto</code>, the kernel's run-time rule.</p></section>`;
  const calls = data.decisions.filter((d) => d.call !== null);
  const confirms = data.decisions.filter((d) => d.call === null);
  const changed = calls.filter((d) => d.choice !== 'auto').length;
  return `<section id="tuning"><h2>Tuning decisions</h2>
<p>${calls.length} kernel calls tuned${data.tunedOn ? ` on <code>${escapeHtml(data.tunedOn)}</code>` : ''}: <b>${changed}</b> run a variant other than <code>auto</code>. Each alternative was measured in the plan (the whole program run, medians over repeated runs); a variant is kept only where it beats auto by 3% in total and is not slower at any point beyond 3% and that point's noise, and where its graph, run end to end beside a second copy of the untuned plan, is not slower either. Hover a cell for its spread, or why it could not run.</p>
<div class="grid"><div class="chart"><canvas id="chart-variants"></canvas></div>${confirms.length ? '<div class="chart"><canvas id="chart-confirm"></canvas></div>' : '<p class="muted">No graph changed: nothing to confirm end to end.</p>'}</div>
${confirms.length ? `<h3>End-to-end confirmation per graph</h3>${decisionTables(confirms)}` : ''}
${decisionTables(calls)}</section>`;
}

function fastSection(data: ReportData): string {
  const f = data.fast;
  if (!f) return '';
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const rows = f.curve
    .map(
      (p) =>
        `<tr${p.chosen ? ' class="chosen"' : ''}><td>${escapeHtml(p.rung)}</td><td>${p.shortlist ? 'shortlist' : p.clusters ? `clusters R ${p.clusters} K ${p.topK}` : 'full projection'}</td><td class="num">${pct(p.identicalSentences)}</td><td class="num">${pct(p.top1Agreement)}</td><td class="num">${f.hasBleu ? p.bleu.toFixed(2) : ''}</td><td class="num">${p.seconds ? p.seconds.toFixed(3) : 'not timed'}</td><td class="num">${p.seconds ? `${(f.fp32Seconds / p.seconds).toFixed(2)}×` : ''}</td><td>${p.gatePassed ? 'holds' : 'fails'}${p.chosen ? ' · <b>chosen</b>' : ''}</td></tr>`,
    )
    .join('');
  return `<section id="fast"><h2>Fast search (planc optimize --fast)</h2>
<p><b>${escapeHtml(f.choice)}</b></p><p>Each combination was built and measured against the float32 plan with the full projection on ${f.evalSentences} sentences of <code>${escapeHtml(f.evalSource)}</code> (gate <code>${escapeHtml(f.gate)}</code>), and timed on ${f.timeSentences} of them at batch ${f.timeBatch}.</p>
<table><tr><th>rung</th><th>vocabulary</th><th>identical</th><th>top-1</th><th>BLEU</th><th>seconds</th><th>speed vs float32</th><th>gate</th></tr>${rows}</table>
${f.notes ? `<p class="reason">${f.notes.split('\n').map(escapeHtml).join('<br>')}</p>` : ''}</section>`;
}

function quantSection(data: ReportData): string {
  const q = data.quantization;
  if (!q)
    return `<section id="precision"><h2>Precision per layer</h2><p class="muted">float32 throughout (not quantized; planc optimize --quantize int8|w8|int16|auto).</p></section>`;
  return `<section id="precision"><h2>Precision per layer</h2>
<p>mode <b>${escapeHtml(q.mode || 'fixed')}</b>; weights ${mb(q.weightBytes)} (float32 ${mb(q.weightBytesFp32)}); ${q.gate ? `gate <code>${escapeHtml(q.gate)}</code> ${q.gatePassed ? '<span class="pill changed">held</span>' : '<span class="pill rolled">failed</span>'}; ` : ''}${q.evalSentences ? `top-1 agreement ${(q.top1Agreement * 100).toFixed(1)}%, ${q.identicalSentences}/${q.evalSentences} sentences identical to float32` : ''}</p>
<div class="chart tall"><canvas id="chart-precision"></canvas></div>
<details><summary>${q.layers.length} layers</summary><table><tr><th>graph</th><th>node</th><th>precision</th><th>relative error</th><th>why</th></tr>${q.layers.map((l) => `<tr><td>${escapeHtml(l.graph)}</td><td><code>${escapeHtml(l.node)}</code></td><td>${escapeHtml(l.precision)}</td><td class="num">${l.error < 0 ? 'not measured' : l.error.toExponential(2)}</td><td class="reason">${escapeHtml(l.reason)}</td></tr>`).join('')}</table></details></section>`;
}

function kvTable(o: Record<string, unknown>): string {
  const entries = Object.entries(o).filter(
    ([, v]) => v !== undefined && v !== '' && !(Array.isArray(v) && v.length === 0),
  );
  return `<div class="kv">${entries.map(([k, v]) => `<b>${escapeHtml(k)}</b><span>${escapeHtml(typeof v === 'object' ? JSON.stringify(v) : String(v))}</span>`).join('')}</div>`;
}

/** The page for a plan's report data. */
export function renderReport(data: ReportData): string {
  const timed = data.graphs.some((g) => g.timing.length);
  const totalTop = data.graphs
    .flatMap((g) => (g.timing[0]?.top ?? []).map((t) => ({ ...t, graph: g.graph, point: g.timing[0]!.point })))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 12);
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>planc report: ${escapeHtml(data.plan)}</title><style>${STYLE}</style></head><body>
<header><h1>planc report · ${escapeHtml(data.plan)}</h1><div class="sub">planc ${escapeHtml(data.plancVersion)} · target ${escapeHtml(data.target)} · profile batch ≤ ${data.profile.maxBatch}, source ≤ ${data.profile.maxSrcLen}, target ≤ ${data.profile.maxTgtLen} · ${data.weights.tensors} weights, ${mb(data.weights.bytes)}${data.created ? ` · created ${escapeHtml(data.created)}` : ''}</div></header>
<main>
<section id="time"><h2>Where the time goes</h2>
${
  timed
    ? `<div class="grid"><div class="chart"><canvas id="chart-graphs"></canvas></div><div class="chart"><canvas id="chart-ops"></canvas></div></div>
<h3>Slowest calls (${escapeHtml(data.graphs.find((g) => g.timing.length)?.timing[0]?.point ?? '')})</h3><table><tr><th>graph</th><th>call</th><th>kernel</th><th>variant</th><th>node</th><th>ms</th></tr>${totalTop.map((t) => `<tr><td>${escapeHtml(t.graph)}</td><td class="num">${t.call}</td><td>${escapeHtml(t.kernel)}</td><td>${escapeHtml(t.variant)}</td><td><code>${escapeHtml(t.node)}</code></td><td class="num">${fmtMs(t.ms)}</td></tr>`).join('')}</table>`
    : '<p class="muted">Not profiled (planc report ran with --no-profile, or the native runtime is missing).</p>'
}
</section>
${decisionsSection(data)}
${fastSection(data)}
${quantSection(data)}
${vocabSection(data)}
<section id="memory"><h2>Memory arena</h2><p>${data.graphs.map((g) => `<b>${escapeHtml(g.graph)}</b> ${mb(g.arenaBytes)} (lower bound ${mb(g.arenaLowerBound)}, all tensors ${mb(g.tensorBytesSum)})`).join(' · ')}</p><div class="chart"><canvas id="chart-memory"></canvas></div></section>
<div class="grid">
<section id="machine"><h2>Machine</h2>${data.machine ? kvTable(data.machine) : '<p class="muted">not profiled</p>'}${data.tunedOn ? `<p>tuned on device <code>${escapeHtml(data.tunedOn)}</code></p>` : ''}</section>
<section id="conventions"><h2>Conventions</h2>${kvTable(data.conventions)}</section>
</div>
</main>
<script type="application/json" id="report-data">${scriptJson(data)}</script>
<script>${CHART_JS()}</script>
<script>${PAGE_SCRIPT}</script>
</body></html>`;
}

/** The charts, drawn from the embedded data. */
const PAGE_SCRIPT = `
(function () {
  const data = JSON.parse(document.getElementById('report-data').textContent);
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.font.size = 12;
  const palette = ['#3b6fd8', '#2e9d57', '#e08a1e', '#b0419a', '#1aa3a3', '#d0453f', '#7a5cd6', '#8c9b2f', '#5b6472', '#c97b63'];
  const el = (id) => document.getElementById(id);
  const title = (text) => ({ display: true, text, font: { size: 14, weight: '600' } });
  const graphs = data.graphs.filter((g) => g.timing.length);
  if (el('chart-graphs') && graphs.length) {
    const points = graphs[0].timing.map((t) => t.point);
    new Chart(el('chart-graphs'), { type: 'bar', data: { labels: graphs.map((g) => g.graph), datasets: points.map((p, i) => ({ label: p, backgroundColor: palette[i], data: graphs.map((g) => (g.timing.find((t) => t.point === p) || {}).runMs || 0) })) },
      options: { plugins: { title: title('one run per graph (ms)') }, scales: { y: { title: { display: true, text: 'ms' } } } } });
    const ops = [...new Set(graphs.flatMap((g) => g.timing[0].byOp.map((o) => o.op)))];
    const total = (op) => graphs.reduce((s, g) => s + ((g.timing[0].byOp.find((o) => o.op === op) || {}).ms || 0), 0);
    ops.sort((a, b) => total(b) - total(a));
    const shown = ops.slice(0, 12);
    new Chart(el('chart-ops'), { type: 'bar', data: { labels: shown, datasets: graphs.map((g, i) => ({ label: g.graph, backgroundColor: palette[i], data: shown.map((op) => (g.timing[0].byOp.find((o) => o.op === op) || {}).ms || 0) })) },
      options: { indexAxis: 'y', plugins: { title: title('time per op kind at ' + points[0] + ' (ms)') }, scales: { x: { stacked: true }, y: { stacked: true, ticks: { autoSkip: false } } } } });
  }
  const calls = data.decisions.filter((d) => d.call !== null && d.alternatives.length);
  if (el('chart-variants') && calls.length) {
    const variants = [...new Set(calls.flatMap((d) => d.alternatives.map((a) => a.variant)))];
    const sumOf = (v) => calls.reduce((s, d) => { const a = d.alternatives.find((x) => x.variant === v); return s + (a && !a.note ? a.micros : 0); }, 0) / 1000;
    const runnable = variants.filter((v) => calls.every((d) => { const a = d.alternatives.find((x) => x.variant === v); return !a || (!a.note && a.micros > 0); }));
    const labels = [...runnable.map((v) => 'all ' + v), 'tuned'];
    const values = [...runnable.map(sumOf), calls.reduce((s, d) => s + d.micros, 0) / 1000];
    new Chart(el('chart-variants'), { type: 'bar', data: { labels, datasets: [{ label: 'ms (sum over tuned calls)', data: values, backgroundColor: labels.map((l) => (l === 'tuned' ? '#2e9d57' : '#9fb3d9')) }] },
      options: { plugins: { legend: { display: false }, title: title('tuned calls: one variant everywhere vs the tuned mix (ms)') } } });
  }
  const confirms = data.decisions.filter((d) => d.call === null);
  if (el('chart-confirm') && confirms.length) {
    new Chart(el('chart-confirm'), { type: 'bar', data: { labels: confirms.map((d) => d.graph), datasets: ['untuned', 'tuned'].map((v, i) => ({ label: v, backgroundColor: i ? '#2e9d57' : '#9fb3d9', data: confirms.map((d) => ((d.alternatives.find((a) => a.variant === v) || {}).micros || 0) / 1000) })) },
      options: { plugins: { title: title('end to end per graph, untuned vs tuned (ms, summed over points)') } } });
  }
  const q = data.quantization;
  if (el('chart-precision') && q) {
    const layers = q.layers.filter((l) => l.error >= 0);
    const precisions = [...new Set(layers.map((l) => l.precision))];
    new Chart(el('chart-precision'), { type: 'bar', data: { labels: layers.map((l) => l.graph + ' ' + l.node), datasets: precisions.map((p, i) => ({ label: p, backgroundColor: palette[i], data: layers.map((l) => (l.precision === p ? l.error : null)) })) },
      options: { plugins: { title: title('relative error per layer, by precision') }, scales: { x: { stacked: true, ticks: { display: layers.length < 40 } }, y: { type: 'logarithmic', title: { display: true, text: 'relative error' } } } } });
  }
  if (el('chart-vocab') && data.vocabCurve) {
    const ks = [...new Set(data.vocabCurve.map((p) => p.topK))];
    new Chart(el('chart-vocab'), { type: 'scatter', data: { datasets: ks.map((k, i) => ({ label: 'K ' + k, backgroundColor: palette[i], borderColor: palette[i],
      pointRadius: data.vocabCurve.filter((p) => p.topK === k).map((p) => (p.chosen ? 8 : 4)), pointStyle: data.vocabCurve.filter((p) => p.topK === k).map((p) => (p.gatePassed ? 'circle' : 'crossRot')),
      data: data.vocabCurve.filter((p) => p.topK === k).map((p) => ({ x: p.cost, y: 100 * p.identicalSentences })) })) },
      options: { plugins: { title: title('identical sentences vs cost per decoder row (R centroids + active ids); crosses fail the gate, the large dot is chosen') }, scales: { x: { type: 'logarithmic', title: { display: true, text: 'dot products a row' } }, y: { title: { display: true, text: 'identical %' } } } } });
  }
  if (el('chart-memory')) {
    const n = Math.max(...data.graphs.map((g) => g.live.length));
    new Chart(el('chart-memory'), { type: 'line', data: { labels: Array.from({ length: n }, (_, i) => i), datasets: data.graphs.map((g, i) => ({ label: g.graph + ' live MB', data: g.live.map((b) => b / 1e6), borderColor: palette[i], backgroundColor: palette[i] + '22', fill: true, pointRadius: 0, borderWidth: 1.5 })) },
      options: { plugins: { title: title('arena bytes live over each program (MB, by kernel call)') }, scales: { x: { title: { display: true, text: 'kernel call' }, ticks: { maxTicksLimit: 20 } }, y: { title: { display: true, text: 'MB' } } } } });
  }
})();
`;
