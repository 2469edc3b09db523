// DDGviz: one self-contained HTML page (inline CSS, SVG and script, nothing fetched) showing Jacobi decodes per sentence:
// tokens coloured by the iteration that fixed them, the decoding dependency graph, the draft at every iteration, totals.
import { traceTotals, type JacobiSentenceTrace } from '../runtime/decode/jacobi-trace.ts';

/** What the page says besides the traces. */
export interface DdgvizMeta {
  /** Page title (default "DDGviz"). */
  title?: string;
  /** The plan file, shown in the header. */
  plan?: string;
  /** Decoder runs the sentences shared (the batch size); shown, since rows of a batch iterate together. */
  batchSize?: number;
  /** A token's text piece (a leading space marks a word start); ids are shown when absent or when it gives ''. */
  tokenText?: (id: number) => string;
  /** Per trace: the source text. */
  sources?: (string | undefined)[];
  /** Per trace: the translation text. */
  translations?: (string | undefined)[];
}

/** HTML-escapes text for element content and attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** Viridis, sampled: t in [0, 1] → an rgb colour (dark purple → yellow). */
const VIRIDIS: [number, number, number][] = [
  [68, 1, 84],
  [72, 40, 120],
  [62, 74, 137],
  [49, 104, 142],
  [38, 130, 142],
  [31, 158, 137],
  [53, 183, 121],
  [110, 206, 88],
  [181, 222, 43],
  [253, 231, 37],
];

function viridis(t: number): { bg: string; fg: string } {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const k = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const f = x - k;
  const c = VIRIDIS[k]!.map((v, i) => Math.round(v + (VIRIDIS[k + 1]![i]! - v) * f));
  const luma = 0.299 * c[0]! + 0.587 * c[1]! + 0.114 * c[2]!;
  return { bg: `rgb(${c.join(',')})`, fg: luma > 140 ? '#1b1b1b' : '#ffffff' };
}

/** Colour of iteration `it` of 1..max. */
function iterColour(it: number, max: number): { bg: string; fg: string } {
  return viridis(max <= 1 ? 0 : (it - 1) / (max - 1));
}

/** A token as shown: its piece (leading space as ▁) or its id. */
function labeller(meta: DdgvizMeta): (id: number) => string {
  return (id) => {
    const s = meta.tokenText?.(id) ?? '';
    return s === '' ? `#${id}` : s.replace(/^ /, '▁').replace(/\n/g, '⏎');
  };
}

/** At most n characters (… when cut). */
function clip(s: string, n: number): string {
  const chars = [...s];
  return chars.length <= n ? s : `${chars.slice(0, n - 1).join('')}…`;
}

function ratio(tokens: number, iterations: number): string {
  return iterations === 0 ? '–' : (tokens / iterations).toFixed(2);
}

const STYLE = `
:root { --ink:#1d2330; --muted:#667085; --line:#e3e6ec; --bg:#f6f7f9; --card:#fff; --accent:#3b5bdb; --changed:#ffd43b; --final:#2f9e44; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif; color:var(--ink); background:var(--bg); }
header { padding:20px 28px 12px; background:var(--card); border-bottom:1px solid var(--line); }
h1 { margin:0 0 4px; font-size:22px; }
h1 small { font-weight:400; color:var(--muted); font-size:14px; margin-left:8px; }
.meta { color:var(--muted); }
.totals { display:flex; gap:12px; flex-wrap:wrap; margin:14px 0 4px; }
.card { background:var(--bg); border:1px solid var(--line); border-radius:8px; padding:8px 14px; min-width:120px; }
.card b { display:block; font-size:20px; }
.card span { color:var(--muted); font-size:12px; }
main { padding:16px 28px 40px; }
.toolbar { display:flex; gap:8px; align-items:center; margin-bottom:10px; color:var(--muted); }
button { font:inherit; border:1px solid var(--line); background:var(--card); border-radius:6px; padding:4px 10px; cursor:pointer; }
button:hover { border-color:var(--accent); color:var(--accent); }
details.sentence { background:var(--card); border:1px solid var(--line); border-radius:10px; margin:8px 0; }
details.sentence > summary { display:grid; grid-template-columns:44px minmax(0,1fr) 250px 140px; gap:12px; align-items:center; padding:9px 14px; cursor:pointer; list-style:none; }
details.sentence > summary::-webkit-details-marker { display:none; }
details.sentence[open] > summary { border-bottom:1px solid var(--line); }
.idx { font-weight:600; color:var(--accent); }
.idx::before { content:'▸ '; color:var(--muted); }
details[open] .idx::before { content:'▾ '; }
.txt { white-space:nowrap; overflow:hidden; text-overflow:ellipsis; }
.stat { color:var(--muted); font-variant-numeric:tabular-nums; white-space:nowrap; }
.bar { position:relative; height:10px; background:#8ce99a; border-radius:5px; overflow:hidden; }
.bar i { position:absolute; left:0; top:0; bottom:0; background:var(--accent); border-radius:5px; }
.body { padding:12px 18px 18px; }
.body h3 { font-size:13px; text-transform:uppercase; letter-spacing:.04em; color:var(--muted); margin:18px 0 8px; }
.texts { display:grid; grid-template-columns:100px 1fr; gap:2px 12px; }
.texts dt { color:var(--muted); }
.texts dd { margin:0; }
.strip { display:flex; flex-wrap:wrap; gap:4px; }
.tok { display:inline-flex; flex-direction:column; align-items:center; border-radius:6px; padding:3px 7px 2px; font-family:ui-monospace,"DejaVu Sans Mono",monospace; font-size:13px; white-space:pre; }
.tok sub { font-family:system-ui,sans-serif; font-size:10px; opacity:.85; }
.legend { display:flex; align-items:center; gap:8px; color:var(--muted); font-size:12px; margin-top:6px; }
.legend .ramp { width:180px; height:10px; border-radius:5px; }
.scroll { overflow-x:auto; padding-bottom:4px; }
svg.ddg text { font-family:ui-monospace,"DejaVu Sans Mono",monospace; font-size:11px; fill:var(--ink); }
svg.ddg .edge { fill:none; }
svg.ddg .edge.weak { stroke-dasharray:3 3; }
svg.ddg.focus .edge { opacity:.06 !important; }
svg.ddg.focus .edge.on { opacity:1 !important; stroke-width:2.4; }
svg.ddg .node { cursor:pointer; }
svg.ddg .group text { font-family:system-ui,sans-serif; font-size:10px; fill:var(--muted); }
table.grid { border-collapse:separate; border-spacing:2px; font-family:ui-monospace,"DejaVu Sans Mono",monospace; font-size:11px; }
table.grid th { font-weight:500; color:var(--muted); padding:2px 4px; white-space:nowrap; }
table.grid thead th { max-width:80px; overflow:hidden; text-overflow:ellipsis; vertical-align:bottom; line-height:1.25; }
table.grid thead th b { display:block; color:var(--ink); font-weight:600; }
table.grid th.row { text-align:right; }
table.grid td { padding:2px 5px; border-radius:4px; white-space:pre; min-width:30px; max-width:80px; overflow:hidden; text-overflow:ellipsis; text-align:center; }
td.guess { background:#f1f3f5; color:#495057; }
td.changed { background:#fff3bf; color:#5c3c00; box-shadow:inset 0 0 0 1px #fab005; }
td.final { background:#ebfbee; color:#2b8a3e; }
td.fixes { background:#2f9e44; color:#fff; font-weight:600; }
td.past { opacity:.45; }
td.off { color:#ced4da; text-align:center; }
.keys { display:flex; gap:14px; flex-wrap:wrap; font-size:12px; color:var(--muted); margin-top:6px; }
.keys span::before { content:''; display:inline-block; width:12px; height:12px; border-radius:3px; margin-right:5px; vertical-align:-2px; background:var(--c); box-shadow:inset 0 0 0 1px rgba(0,0,0,.15); }
.note { color:var(--muted); font-size:12px; max-width:900px; }
`;

const SCRIPT = `
document.querySelectorAll('[data-all]').forEach(function (b) {
  b.addEventListener('click', function () {
    var open = b.getAttribute('data-all') === 'open';
    document.querySelectorAll('details.sentence').forEach(function (d) { d.open = open; });
  });
});
document.querySelectorAll('svg.ddg').forEach(function (svg) {
  svg.querySelectorAll('.node').forEach(function (n) {
    var pos = n.getAttribute('data-pos');
    n.addEventListener('mouseenter', function () {
      svg.classList.add('focus');
      svg.querySelectorAll('.edge').forEach(function (e) {
        if (e.getAttribute('data-from') === pos || e.getAttribute('data-to') === pos) e.classList.add('on');
      });
    });
    n.addEventListener('mouseleave', function () {
      svg.classList.remove('focus');
      svg.querySelectorAll('.edge.on').forEach(function (e) { e.classList.remove('on'); });
    });
  });
});
`;

/** The tokens in order, each coloured by the iteration that fixed it. */
function tokenStrip(t: JacobiSentenceTrace, label: (id: number) => string): string {
  const chips = t.tokens.map((id, q) => {
    const it = t.fixedAt[q]!;
    const c = iterColour(it, t.iterations);
    return `<span class="tok" style="background:${c.bg};color:${c.fg}" title="${escapeHtml(`position ${q}: ${label(id)} (id ${id}), final at iteration ${it}`)}">${escapeHtml(label(id))}<sub>${it}</sub></span>`;
  });
  const stops = VIRIDIS.map((_, k) => viridis(k / (VIRIDIS.length - 1)).bg).join(',');
  return `<div class="strip">${chips.join('')}</div>
<div class="legend">iteration 1 <span class="ramp" style="background:linear-gradient(90deg,${stops})"></span> iteration ${t.iterations}</div>`;
}

/** The decoding dependency graph: tokens left to right, arcs from each token to the earlier tokens it depended on. */
function graphSvg(t: JacobiSentenceTrace, label: (id: number) => string, n: number): string {
  const dx = 62;
  const left = 24;
  const far = Math.max(1, ...t.edges.map((e) => e.from - e.to));
  const arcTop = Math.min(150, 26 + far * 18);
  const y = arcTop + 14;
  const width = left * 2 + Math.max(0, t.tokens.length - 1) * dx;
  const x = (q: number) => left + q * dx;
  const edges = t.edges.map((e) => {
    const h = Math.min(arcTop - 4, 16 + (e.from - e.to) * 18);
    const c = iterColour(e.iteration, t.iterations).bg;
    const cls = e.settles ? 'edge' : 'edge weak';
    const op = e.settles ? 0.85 : 0.4;
    return `<path class="${cls}" data-from="${e.from}" data-to="${e.to}" d="M${x(e.from)},${y - 8} C${x(e.from)},${y - 8 - h} ${x(e.to)},${y - 8 - h} ${x(e.to)},${y - 8}" stroke="${c}" stroke-width="1.6" opacity="${op}" marker-end="url(#arrow${n})"><title>${escapeHtml(`${label(t.tokens[e.from]!)} (position ${e.from}) changed at iteration ${e.iteration} after ${label(t.tokens[e.to]!)} (position ${e.to}) changed${e.settles ? '; it got its final token then' : ''}`)}</title></path>`;
  });
  const nodes = t.tokens.map((id, q) => {
    const it = t.fixedAt[q]!;
    const c = iterColour(it, t.iterations);
    const deps = t.edges.filter((e) => e.from === q).length;
    return `<g class="node" data-pos="${q}"><title>${escapeHtml(`position ${q}: ${label(id)} (id ${id}); final at iteration ${it}; depends on ${deps} earlier token${deps === 1 ? '' : 's'}`)}</title><circle cx="${x(q)}" cy="${y}" r="8" fill="${c.bg}" stroke="#fff" stroke-width="1.5"/><text x="${x(q)}" y="${y + 24}" text-anchor="middle">${escapeHtml(clip(label(id), 8))}</text></g>`;
  });
  // tokens fixed by the same run (decoded in parallel): a bracket under them
  const groups: string[] = [];
  for (let q = 0; q < t.tokens.length; ) {
    let r = q;
    while (r + 1 < t.tokens.length && t.fixedAt[r + 1] === t.fixedAt[q]) r++;
    if (r > q) {
      const gy = y + 36;
      groups.push(
        `<g class="group"><path d="M${x(q) - 6},${gy} v4 H${x(r) + 6} v-4" fill="none" stroke="#adb5bd"/><text x="${(x(q) + x(r)) / 2}" y="${gy + 16}" text-anchor="middle">${r - q + 1} in iteration ${t.fixedAt[q]}</text></g>`,
      );
    }
    q = r + 1;
  }
  const height = y + 62;
  return `<svg class="ddg" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="decoding dependency graph">
<defs><marker id="arrow${n}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="#868e96"/></marker></defs>
<line x1="${x(0)}" y1="${y}" x2="${x(Math.max(0, t.tokens.length - 1))}" y2="${y}" stroke="#dee2e6" stroke-width="2"/>
${edges.join('\n')}
${nodes.join('\n')}
${groups.join('\n')}
</svg>`;
}

/** The draft at every iteration: rows = iterations, columns = positions; changed cells highlighted. */
function draftGrid(t: JacobiSentenceTrace, label: (id: number) => string): string {
  const width = Math.max(t.tokens.length, ...t.drafts.map((d) => d.start + d.tokens.length));
  const head = Array.from({ length: width }, (_, q) => {
    const name = q < t.tokens.length ? label(t.tokens[q]!) : '';
    return `<th title="${escapeHtml(`position ${q}${name ? `: ${name}` : ' (past the end)'}`)}">${q}<b>${escapeHtml(clip(name, 8)) || '&nbsp;'}</b></th>`;
  });
  let fixedBefore = 0;
  const rows = t.drafts.map((d) => {
    const changed = new Set(d.changed);
    const cells = Array.from({ length: width }, (_, q) => {
      const k = q - d.start;
      if (k < 0 || k >= d.tokens.length) return q < fixedBefore ? '<td class="off">·</td>' : '<td></td>';
      const id = d.tokens[k]!;
      const cls =
        q >= fixedBefore && q < d.fixed ? 'fixes' : q < d.fixed ? 'final' : changed.has(q) ? 'changed' : 'guess';
      const past = q >= t.tokens.length ? ' past' : '';
      const what =
        cls === 'fixes'
          ? 'final from this iteration'
          : cls === 'final'
            ? 'final (recomputed)'
            : cls === 'changed'
              ? 'guess, changed'
              : 'guess, unchanged';
      return `<td class="${cls}${past}" title="${escapeHtml(`iteration ${d.iteration}, position ${q}: ${label(id)} (id ${id}), ${what}`)}">${escapeHtml(clip(label(id), 9))}</td>`;
    });
    const row = `<tr><th class="row" title="${escapeHtml(`iteration ${d.iteration}: positions ${d.start}..${d.start + d.tokens.length - 1} computed; ${d.fixed} final`)}">${d.iteration}</th>${cells.join('')}</tr>`;
    fixedBefore = d.fixed;
    return row;
  });
  return `<div class="scroll"><table class="grid"><thead><tr><th class="row">iter</th>${head.join('')}</tr></thead><tbody>
${rows.join('\n')}
</tbody></table></div>
<div class="keys"><span style="--c:#2f9e44">became final</span><span style="--c:#ebfbee">final (recomputed)</span><span style="--c:#fff3bf">guess changed</span><span style="--c:#f1f3f5">guess unchanged</span><span style="--c:#fff">not computed (· = final)</span></div>`;
}

function sentence(t: JacobiSentenceTrace, i: number, meta: DdgvizMeta, label: (id: number) => string): string {
  const text = meta.translations?.[i] ?? t.tokens.map(label).join(' ');
  const src = meta.sources?.[i];
  const saved = t.tokens.length - t.iterations;
  const fill = t.tokens.length === 0 ? 0 : Math.min(100, (100 * t.iterations) / t.tokens.length);
  const inParallel = t.fixedAt.filter((it, q) => q > 0 && t.fixedAt[q - 1] === it).length;
  return `<details class="sentence" id="s${i + 1}"${i === 0 ? ' open' : ''}>
<summary><span class="idx">${i + 1}</span><span class="txt" title="${escapeHtml(text)}">${escapeHtml(text)}</span><span class="stat">${t.tokens.length} tokens · ${t.iterations} iterations · ×${ratio(t.tokens.length, t.iterations)}</span><span class="bar" title="${t.iterations} iterations for ${t.tokens.length} tokens (${fill.toFixed(0)}%)"><i style="width:${fill.toFixed(1)}%"></i></span></summary>
<div class="body">
<dl class="texts">${src !== undefined ? `<dt>source</dt><dd>${escapeHtml(src)}</dd>` : ''}<dt>translation</dt><dd>${escapeHtml(text)}</dd>
<dt>decoding</dt><dd>${t.tokens.length} tokens in ${t.iterations} iterations (greedy: ${t.tokens.length}); ${saved > 0 ? `${saved} decoder run${saved === 1 ? '' : 's'} saved: ${inParallel} token${inParallel === 1 ? '' : 's'} became final in the same iteration as the token before ${inParallel === 1 ? 'it' : 'them'}` : 'no decoder run saved: every token became final in an iteration of its own'}</dd></dl>
<h3>Tokens, coloured by the iteration that fixed them</h3>
${tokenStrip(t, label)}
<h3>Decoding dependency graph</h3>
<p class="note">An arc from a token back to an earlier one: the earlier token changed at one iteration and this token changed at the next. Solid arcs gave the token its final value; dashed ones an intermediate guess. Hover a token to isolate its arcs; brackets group tokens fixed by the same iteration (decoded in parallel).</p>
<div class="scroll">${graphSvg(t, label, i + 1)}</div>
<h3>Draft at every iteration</h3>
${draftGrid(t, label)}
</div>
</details>`;
}

/** The whole page for `traces` (one per sentence, in the order shown). */
export function renderDdgviz(traces: readonly JacobiSentenceTrace[], meta: DdgvizMeta = {}): string {
  const label = labeller(meta);
  const title = meta.title ?? 'DDGviz';
  const tot = traceTotals(traces);
  const strategies = [
    ...new Set(
      traces.map(
        (t) => `${t.strategy.toUpperCase()}${t.strategy === 'pj' ? ` (chunks of ${t.block})` : ` (b = ${t.block})`}`,
      ),
    ),
  ];
  const faster = traces.filter((t) => t.iterations < t.tokens.length).length;
  const edges = traces.reduce((a, t) => a + t.edges.length, 0);
  const metaLine = [
    meta.plan ? `plan ${meta.plan}` : '',
    strategies.join(', '),
    meta.batchSize ? `batch ${meta.batchSize}` : '',
  ]
    .filter(Boolean)
    .join(' · ');
  const card = (v: string | number, what: string) =>
    `<div class="card"><b>${escapeHtml(String(v))}</b><span>${escapeHtml(what)}</span></div>`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<header>
<h1>${escapeHtml(title)}<small>decoding dependency graphs of parallel Jacobi decoding</small></h1>
<div class="meta">${escapeHtml(metaLine)}</div>
<div class="totals">
${card(tot.sentences, 'sentences')}
${card(tot.tokens, 'tokens (= greedy decoder runs)')}
${card(tot.iterations, 'Jacobi iterations')}
${card(ratio(tot.tokens, tot.iterations), 'tokens per iteration')}
${card(`${faster} / ${tot.sentences}`, 'sentences with fewer iterations than tokens')}
${card(edges, 'dependency arcs')}
</div>
</header>
<main>
<div class="toolbar"><button type="button" data-all="open">Expand all</button><button type="button" data-all="close">Collapse all</button><span>${tot.sentences} sentence${tot.sentences === 1 ? '' : 's'}; click one to open it. Bar: iterations (blue) out of tokens; green: decoder runs saved over greedy.</span></div>
${traces.map((t, i) => sentence(t, i, meta, label)).join('\n')}
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}
