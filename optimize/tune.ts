// The tuner: for every kernel call with variants, each variant this machine runs, measured in context on the real plan
// (optimize/tune-measure.ts) or taken from the persisted cache (optimize/tune-cache.ts); the fastest kept where it
// beats the default beyond the noise, confirmed per graph end to end (a regression is rolled back), every decision
// recorded in the plan's tuning records.
import { PlancError } from '../compiler/diagnostics.ts';
import { onnxDtypeName } from '../compiler/dtype.ts';
import { kernelSpec, kernelVariants } from '../compiler/kernel-schema.ts';
import { constExpr, exprKey } from '../compiler/plan/expr.ts';
import type { PlanFile, PlanHeader, PlanProgram, PlanTuningDecision } from '../compiler/plan/types.ts';
import type { ProgressReporter } from '../passes/pass.ts';
import { nativeBuildId } from '../runtime/native.ts';
import { type CacheEntry, type CachedAlternative, defaultCacheFile, TuningCache } from './tune-cache.ts';
import { confirmByTranslation } from './tune-confirm.ts';
import { regression } from './tune-regression.ts';
import { thisDevice, type TuneDevice } from './tune-device.ts';
import {
  type GraphTimings,
  fastestRound,
  measureInRounds,
  measurePlan,
  type OperatingPoint,
  tuningPoints,
} from './tune-measure.ts';

/** What `--tune` asks. */
export interface TuneRequest {
  /** The cache file; null: no persisted cache (measure everything, keep nothing); undefined: defaultCacheFile(). */
  cacheFile?: string | null;
  /** Calls forced by the caller (BuildOptions.variants keys: kernel or node names): recorded, never tuned. */
  forced?: Readonly<Record<string, string>>;
  /** Timed runs per measurement (default 7), warm-up runs before them (default 2), rounds of every variant (default 3). */
  runs?: number;
  warmup?: number;
  rounds?: number;
  /** Where to measure (default tuningPoints: one row, the profile's most rows, and their middle from 16 rows on). */
  points?: OperatingPoint[];
  /** Or only the batch sizes to tune for (each ≤ the profile's most rows), at tuningPoints' lengths. */
  batches?: number[];
  /** Confirm each graph's choices end to end and roll back a regression (default true). */
  confirm?: boolean;
  /** The device and planc version entries must match (tests use others; default this machine, and the plan's version
   * with the addon's build: `0.1.0+native.<nativeBuildId>`). */
  device?: TuneDevice;
  plancVersion?: string;
}

/** What tuning did, for the CLI and the bench. */
export interface TuneSummary {
  device: TuneDevice;
  cacheFile: string | null;
  points: OperatingPoint[];
  /** Cache lookups of call and confirmation keys. */
  hits: number;
  misses: number;
  /** Keys whose only entries were of another planc version (stale) or another device (foreign): not used, measured anew. */
  stale: string[];
  foreign: string[];
  /** Plan variants loaded and measured (each: every affected graph at every point). */
  measurements: number;
  calls: number;
  /** Calls whose variant changed from the default. */
  changed: number;
  rolledBack: string[];
  seconds: number;
}

/** Over this fraction faster in total, and not slower at any point beyond it: a variant beats the default. */
const MARGIN = 0.03;
/** A graph's confirmation: slower in total beyond MARGIN / 3 or at one point beyond MARGIN (and the noise). */
const GRAPH_MARGINS = { total: MARGIN / 3, point: MARGIN };

/**
 * The plans an end-to-end confirmation alternates: the untuned plan, the tuned one, and a second copy of the untuned
 * one, whose difference from the first is the measurement's noise: a regression must be larger to roll back.
 */
const CONFIRM_ALTERNATIVES = ['untuned', 'tuned', 'untuned again'] as const;

/**
 * A call to tune. Its default (base) is auto, the kernel's run-time rule: select-variants fixes only what auto does on
 * every machine, and a plan tuned before is tuned again from auto.
 */
interface Call {
  program: number;
  index: number;
  graph: string;
  kernel: string;
  node: string;
  variants: string[];
  base: string;
  key: string;
}

const dimsText = (p: PlanProgram, t: number): string => p.tensors[t]!.dims.map((e) => exprKey(p, e)).join('x');

/** What decides a call's times besides the device: kernel, operand dims and dtypes, arguments, variant set, points. */
function callKey(p: PlanProgram, k: number, variants: string[], points: OperatingPoint[]): string {
  const kern = p.kernels[k]!;
  const operand = (t: number) => (p.tensors[t] ? `${onnxDtypeName(p.tensors[t]!.dtype)}[${dimsText(p, t)}]` : 'none');
  return JSON.stringify({
    kernel: kern.name,
    in: kern.inputs.map(operand),
    out: kern.outputs.map(operand),
    iargs: kern.iargs,
    variants,
    points,
  });
}

/** The header with some calls' variants replaced (programs copied; weights and the rest shared). */
function withVariants(h: PlanHeader, set: (program: number, index: number) => string | undefined): PlanHeader {
  return {
    ...h,
    programs: h.programs.map((p, i) => ({
      ...p,
      kernels: p.kernels.map((k, j) => {
        const v = set(i, j);
        return v === undefined ? k : { ...k, variant: v };
      }),
    })),
  };
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const ms = (us: number) => `${(us / 1000).toFixed(3)} ms`;
const pointText = (pt: OperatingPoint) => `batch ${pt.batch}`;

/** Why the runtime refused a plan, short (its message without the plan name prefix). */
const refusal = (e: unknown): string => (e as Error).message.replace(/^PLANC_E\d+: /, '').replace(/ \[[^\]]*\]$/, '');

/**
 * Tunes a cpu plan in place (its calls' variants and header.tuning); returns what it did. Only plans of this machine's
 * target are measured: a cuda plan keeps its heuristic launches (recorded by select-variants), and is refused here.
 * Its phases: collect the calls with variants, measure the variants of those the cache lacks, choose per call,
 * confirm the choices end to end (each graph, then short translations; a regression rolls back), record them.
 */
export async function tunePlan(
  file: PlanFile,
  req: TuneRequest = {},
  progress?: ProgressReporter,
): Promise<TuneSummary> {
  const t0 = performance.now();
  const run = openRun(file, req, progress);
  const { calls, forcedRecords } = collect(run, req.forced ?? {});
  const entries = measure(run, calls);
  const chosen = choose(run, calls, entries);
  const confirmRecords: PlanTuningDecision[] = [];
  if (req.confirm !== false) {
    confirmRecords.push(...confirmGraphs(run, calls, entries, chosen));
    confirmRecords.push(...(await confirmTranslation(run, calls, chosen)));
  }
  record(run, calls, entries, chosen, forcedRecords, confirmRecords);
  run.summary.seconds = (performance.now() - t0) / 1000;
  return run.summary;
}

/** What a tuning run's phases share: the plan, where and how it is measured, the cache, and the summary they fill. */
interface TuneRun {
  file: PlanFile;
  h: PlanHeader;
  device: TuneDevice;
  version: string;
  cache: TuningCache;
  points: OperatingPoint[];
  mo: { runs: number; warmup: number; rounds: number };
  summary: TuneSummary;
  progress?: ProgressReporter;
  /** The cache's entry for key on this device and planc version; the lookup counted in the summary. */
  look(key: string): CacheEntry | undefined;
}

/** A call's variant and why. */
interface Choice {
  variant: string;
  reason: string;
}

/** The run's settings from the request (a cuda plan refused), its cache opened, its summary empty. */
function openRun(file: PlanFile, req: TuneRequest, progress: ProgressReporter | undefined): TuneRun {
  const h = file.header;
  if (h.target.kind !== 'cpu')
    throw new PlancError(
      'PLANC_E302',
      (opt) =>
        `${opt('tune')}: cuda plans keep the heuristic launches of codegen/cuda/rules.ts (recorded in their tuning); tuning measures cpu plans only so far`,
    );
  const device = req.device ?? thisDevice();
  const version = req.plancVersion ?? `${h.plancVersion}+native.${nativeBuildId()}`;
  const cacheFile = req.cacheFile === undefined ? defaultCacheFile() : req.cacheFile;
  const cache = TuningCache.open(cacheFile ?? undefined);
  const points = req.points ?? tuningPoints(file, req.batches);
  const mo = { runs: req.runs ?? 7, warmup: req.warmup ?? 2, rounds: req.rounds ?? 3 };
  const summary: TuneSummary = {
    device,
    cacheFile,
    points,
    hits: 0,
    misses: 0,
    stale: [],
    foreign: [],
    measurements: 0,
    calls: 0,
    changed: 0,
    rolledBack: [],
    seconds: 0,
  };
  const look = (key: string): CacheEntry | undefined => {
    const l = cache.lookup(key, device.id, version);
    if (l.kind === 'hit') {
      summary.hits++;
      return l.entry;
    }
    summary.misses++;
    if (l.kind === 'stale') summary.stale.push(`${key} (planc ${l.entry.plancVersion})`);
    if (l.kind === 'foreign') summary.foreign.push(`${key} (device ${l.entry.device})`);
    return undefined;
  };
  return { file, h, device, version, cache, points, mo, summary, progress, look };
}

/** Collect: every call with variants, in plan order; a call the caller forced is recorded as such, not tuned. */
function collect(
  run: TuneRun,
  forced: Readonly<Record<string, string>>,
): { calls: Call[]; forcedRecords: PlanTuningDecision[] } {
  const forcedRecords: PlanTuningDecision[] = [];
  const calls: Call[] = [];
  run.h.programs.forEach((p, i) =>
    p.kernels.forEach((k, j) => {
      const variants = kernelVariants(k.name).map((v) => v.name);
      if (!variants.length) return;
      const force = forced[k.node] ?? forced[k.name];
      if (force !== undefined) {
        forcedRecords.push({
          key: `${p.graph}:${j}:${k.name}`,
          choice: force,
          micros: 0,
          reason: `forced by the caller's variant choice for ${forced[k.node] !== undefined ? `node ${k.node}` : `kernel ${k.name}`}; not tuned`,
          alternatives: [],
        });
        return;
      }
      calls.push({
        program: i,
        index: j,
        graph: p.graph,
        kernel: k.name,
        node: k.node,
        variants,
        base: 'auto',
        key: callKey(p, j, variants, run.points),
      });
    }),
  );
  run.summary.calls = calls.length;
  return { calls, forcedRecords };
}

/**
 * Measure: each call's cached times, or one measurement per variant name over the graphs whose calls miss (then
 * cached). Calls of one key (the same kernel, dims, dtypes and arguments: e.g. a layer's q, k and v products) share
 * one entry.
 */
function measure(run: TuneRun, calls: Call[]): Map<Call, CacheEntry> {
  const { file, h, points, mo, summary, progress } = run;
  const entries = new Map<Call, CacheEntry>();
  const byKey = new Map<string, CacheEntry | undefined>();
  const missing: Call[] = [];
  for (const c of calls) {
    if (!byKey.has(c.key)) byKey.set(c.key, run.look(c.key));
    const e = byKey.get(c.key);
    if (e) entries.set(c, e);
    else missing.push(c);
  }
  if (!missing.length) return entries;
  const names = [...new Set(missing.flatMap((c) => c.variants))];
  const graphs = [...new Set(missing.map((c) => c.graph))].filter((g) => h.programs.some((p) => p.graph === g));
  const alts = new Map<Call, CachedAlternative[]>(missing.map((c) => [c, []]));
  // in rounds, the variants' order reversed every other round: a call's time is its lowest median over the rounds,
  // so the machine's drift between one variant's measurement and the next (other work, clocks) does not decide
  const bar = progress?.bar(
    `tuning ${missing.length} kernel calls: ${names.length} variants × ${graphs.length} graphs × ${points.length} points × ${mo.rounds} rounds`,
    names.length * mo.rounds,
  );
  const rounds = new Map<string, GraphTimings[][][]>(names.map((v) => [v, []]));
  const notes = new Map<string, string>();
  for (let round = 0; round < mo.rounds; round++) {
    for (const v of round % 2 ? [...names].reverse() : names) {
      if (notes.has(v)) {
        bar?.tick(1);
        continue;
      }
      const mine = new Set(missing.filter((c) => c.variants.includes(v)).map((c) => `${c.program}:${c.index}`));
      const header = withVariants(h, (i, j) => (mine.has(`${i}:${j}`) ? v : undefined));
      try {
        rounds.get(v)!.push(measurePlan({ header, blob: file.blob }, graphs, points, mo));
        summary.measurements++;
      } catch (e) {
        if (!(e instanceof PlancError)) throw e;
        notes.set(v, `not runnable here: ${refusal(e)}`);
      }
      bar?.tick(1);
    }
  }
  bar?.done();
  for (const v of names) {
    const note = notes.get(v) ?? '';
    const ts = note ? [] : rounds.get(v)!;
    for (const c of missing) {
      if (!c.variants.includes(v)) continue;
      const g = graphs.indexOf(c.graph);
      const at = ts.length ? points.map((_, pt) => fastestRound(ts.map((t) => t[pt]![g]!.calls[c.index]!))) : [];
      alts.get(c)!.push({
        variant: v,
        micros: at.map((x) => x.micros),
        spread: at.map((x) => x.spread),
        between: at.map((x) => x.between ?? 0),
        note,
      });
    }
  }
  const pooled = new Map<string, CacheEntry>();
  for (const c of missing) {
    const e = pooled.get(c.key) ?? { key: c.key, device: run.device.id, plancVersion: run.version, alternatives: [] };
    pooled.set(c.key, e);
    entries.set(c, e);
    e.alternatives.push(...alts.get(c)!);
  }
  for (const e of pooled.values()) {
    e.alternatives = poolAlternatives(e.alternatives);
    run.cache.put(e);
  }
  return entries;
}

/** Choose: each call's variant from its times (chooseVariant), with what a prepared operand keeps in memory. */
function choose(run: TuneRun, calls: Call[], entries: Map<Call, CacheEntry>): Map<Call, Choice> {
  const chosen = new Map<Call, Choice>();
  for (const c of calls) {
    const pick = chooseVariant(c, entries.get(c)!, run.points);
    chosen.set(
      c,
      pick.variant === c.base ? pick : { ...pick, reason: pick.reason + preparedNote(run.h, c, pick.variant) },
    );
  }
  return chosen;
}

/**
 * Confirm, per graph whose choices changed: the graph run end to end with its choices against the untuned graph (and
 * its second copy); a regression rolls the graph's choices back (all, or all but the largest gain when that one alone
 * holds). Rolled-back choices are replaced in `chosen`; returns the graphs' confirmation records.
 */
function confirmGraphs(
  run: TuneRun,
  calls: Call[],
  entries: Map<Call, CacheEntry>,
  chosen: Map<Call, Choice>,
): PlanTuningDecision[] {
  const { file, h, points, mo, summary, progress } = run;
  const confirmRecords: PlanTuningDecision[] = [];
  // one graph run end to end with a set of its calls' choices against the untuned graph (and its second copy)
  const confirmGraph = (pi: number, graph: string, set: Call[]) => {
    const key = JSON.stringify({
      confirm: graph,
      source: h.sourceHash,
      choices: set.map((c) => `${c.index}:${chosen.get(c)!.variant}`),
      points,
    });
    let e = run.look(key);
    if (!e) {
      progress?.start(
        `confirming ${graph} end to end${set.length === 1 ? ` with ${set[0]!.kernel} ${chosen.get(set[0]!)!.variant} alone` : ''}`,
      );
      const tunedHeader = withVariants(h, (i, j) => {
        const c = i === pi ? set.find((x) => x.index === j) : undefined;
        return c && chosen.get(c)!.variant;
      });
      const untunedHeader = withVariants(h, (i, j) =>
        i === pi && set.some((c) => c.index === j) ? 'auto' : undefined,
      );
      const untunedFile = { header: untunedHeader, blob: file.blob };
      const measure = () =>
        measureInRounds([untunedFile, { header: tunedHeader, blob: file.blob }, untunedFile], graph, points, {
          ...mo,
          runs: Math.max(mo.runs, 9),
        });
      let ab = measure();
      summary.measurements += 3;
      const micros = (k: number) => ab.map((x) => x[k]!.micros);
      if (regression(micros(0), micros(1), micros(2), GRAPH_MARGINS).regressed) {
        // a regression must hold in a second measurement: each plan's fastest of the two counts
        const second = measure();
        summary.measurements += 3;
        ab = ab.map((perPlan, i) => perPlan.map((x, k) => fastestRound([x, second[i]![k]!])));
      }
      e = {
        key,
        device: run.device.id,
        plancVersion: run.version,
        alternatives: CONFIRM_ALTERNATIVES.map((variant, k) => ({
          variant,
          micros: ab.map((x) => x[k]!.micros),
          spread: ab.map((x) => x[k]!.spread),
          note: '',
        })),
      };
      run.cache.put(e);
    }
    const [u, t, again] = e.alternatives as [CachedAlternative, CachedAlternative, CachedAlternative | undefined];
    // a regression beyond what the untuned plan differs from its second copy by in the same measurement: in total,
    // or at one point
    const { regressed, worseAt, noise, noiseAt } = regression(u.micros, t.micros, again?.micros, GRAPH_MARGINS);
    const per = `${points.map((pt, i) => `${pointText(pt)} ${ms(u.micros[i]!)} → ${ms(t.micros[i]!)}`).join(', ')} (the untuned plan against its second copy: ${(noise * 100).toFixed(1)}%)${worseAt >= 0 ? `, slower at ${pointText(points[worseAt]!)} by ${((t.micros[worseAt]! / u.micros[worseAt]! - 1) * 100).toFixed(0)}% (its second copy: ${(noiseAt[worseAt]! * 100).toFixed(1)}%)` : ''}`;
    return { e, u, t, regressed, per };
  };
  // a call's measured gain over its default, µs summed over the points
  const gain = (c: Call) => {
    const alts = entries.get(c)!.alternatives;
    const of = (v: string) => sum(alts.find((a) => a.variant === v)?.micros ?? []);
    return of(c.base) - of(chosen.get(c)!.variant);
  };
  for (const [pi, p] of h.programs.entries()) {
    const mine = calls.filter((c) => c.program === pi && chosen.get(c)!.variant !== c.base);
    if (!mine.length) continue;
    let r = confirmGraph(pi, p.graph, mine);
    let why = `${p.graph} run end to end, untuned → tuned: ${r.per}`;
    let kept: Call[] = r.regressed ? [] : mine;
    if (r.regressed && mine.length > 1) {
      // the calls can slow each other down (caches, BLAS threads) where each alone was faster: the largest gain alone
      const best = [...mine].sort((a, b) => gain(b) - gain(a) || a.index - b.index)[0]!;
      const alone = confirmGraph(pi, p.graph, [best]);
      why += ` — a regression; with ${best.node} ${chosen.get(best)!.variant} alone (the largest gain): ${alone.per}`;
      if (!alone.regressed) {
        r = alone;
        kept = [best];
      }
    }
    if (kept.length < mine.length) {
      summary.rolledBack.push(p.graph);
      for (const c of mine) {
        if (!kept.includes(c))
          chosen.set(c, {
            variant: c.base,
            reason: `rolled back: ${p.graph} ran slower end to end with its tuned variants (${why}); ${chosen.get(c)!.reason}`,
          });
      }
    }
    why += kept.length === mine.length ? '' : kept.length ? `: only ${kept[0]!.node} kept` : ': rolled back';
    confirmRecords.push({
      key: `${p.graph}:confirm`,
      choice: kept.length ? 'tuned' : 'untuned',
      micros: sum(kept.length ? r.t.micros : r.u.micros),
      reason: why,
      alternatives: r.e.alternatives.map((a) => ({
        variant: a.variant,
        micros: sum(a.micros),
        spread: Math.max(...a.spread),
        note: a.note,
      })),
    });
  }
  return confirmRecords;
}

/**
 * Confirm the whole plan by short translations (every graph at the row counts a decode goes through): a regression at
 * any point rolls every choice back (replaced in `chosen`). Returns its record; none when nothing changed or the plan
 * does not decode.
 */
async function confirmTranslation(
  run: TuneRun,
  calls: Call[],
  chosen: Map<Call, Choice>,
): Promise<PlanTuningDecision[]> {
  const { file, h, points, summary, progress } = run;
  const changedCalls = calls.filter((c) => chosen.get(c)!.variant !== c.base);
  if (!changedCalls.length || !h.programs.some((p) => p.graph === 'decoder_with_past' || p.graph === 'decoder'))
    return [];
  const key = JSON.stringify({
    confirm: 'translation',
    source: h.sourceHash,
    choices: changedCalls.map((c) => `${c.graph}:${c.index}:${chosen.get(c)!.variant}`),
    points,
  });
  let e = run.look(key);
  if (!e) {
    progress?.start('confirming the tuned plan by short translations');
    const untunedHeader = withVariants(h, (i, j) =>
      calls.some((c) => c.program === i && c.index === j) ? 'auto' : undefined,
    );
    const tunedHeader = withVariants(h, (i, j) => {
      const c = calls.find((x) => x.program === i && x.index === j);
      return c && chosen.get(c)!.variant;
    });
    const untunedFile = { header: untunedHeader, blob: file.blob };
    const files = [untunedFile, { header: tunedHeader, blob: file.blob }, untunedFile];
    let checks = await confirmByTranslation(files, points);
    summary.measurements += 3;
    const perToken = (k: number) => checks.map((c) => c.msPerToken[k]!);
    if (regression(perToken(0), perToken(1), perToken(2), { point: MARGIN }).regressed) {
      // a regression must hold in a second measurement: each plan's fastest of the two counts (one check here
      // rolled back a plan 7% slower at 32 rows, with its second copy 0.3% apart, that translated the test set 1.09x faster)
      const second = await confirmByTranslation(files, points);
      summary.measurements += 3;
      checks = checks.map((c, i) => ({
        msPerToken: c.msPerToken.map((m, k) => Math.min(m, second[i]!.msPerToken[k]!)),
        identical: c.identical && second[i]!.identical,
      }));
    }
    const round = (x: number) => Math.round(x * 1000) / 1000;
    const same = checks
      .map((c, i) => `${pointText(points[i]!)} ${c.identical ? 'same tokens' : 'other tokens (summation order)'}`)
      .join(', ');
    e = {
      key,
      device: run.device.id,
      plancVersion: run.version,
      alternatives: CONFIRM_ALTERNATIVES.map((variant, k) => ({
        variant,
        micros: checks.map((c) => round(c.msPerToken[k]! * 1000)),
        spread: checks.map(() => 0),
        note: k === 1 ? same : '',
      })),
    };
    run.cache.put(e);
  }
  const [u, t, again] = e.alternatives as [CachedAlternative, CachedAlternative, CachedAlternative | undefined];
  // slower at a point beyond MARGIN and beyond what the untuned plan differs from its second copy by there
  const { worseAt: worse, noiseAt: noise } = regression(u.micros, t.micros, again?.micros, { point: MARGIN });
  const per = `${points.map((pt, i) => `${pointText(pt)} ${ms(u.micros[i]!)} → ${ms(t.micros[i]!)} per token (untuned against its second copy ${(noise[i]! * 100).toFixed(1)}%)`).join(', ')}; ${t.note}`;
  if (worse >= 0) {
    summary.rolledBack.push('translation');
    for (const c of changedCalls)
      chosen.set(c, {
        variant: c.base,
        reason: `rolled back: the tuned plan translated slower (${per}); ${chosen.get(c)!.reason}`,
      });
  }
  return [
    {
      key: 'translation:confirm',
      choice: worse >= 0 ? 'untuned' : 'tuned',
      micros: sum(worse >= 0 ? u.micros : t.micros),
      reason: `short greedy translations of synthetic source ids, untuned → tuned (fastest of 3 alternated runs): ${per}${worse >= 0 ? ` — slower at ${pointText(points[worse]!)}: every choice rolled back` : ''}`,
      alternatives: e.alternatives.map((a) => ({ variant: a.variant, micros: sum(a.micros), spread: 0, note: '' })),
    },
  ];
}

/**
 * Record: each call's final variant applied to the plan, and its decision with its alternatives recorded in plan
 * order beside the forced calls' and the confirmations' records; the plan marked tuned; the cache saved.
 */
function record(
  run: TuneRun,
  calls: Call[],
  entries: Map<Call, CacheEntry>,
  chosen: Map<Call, Choice>,
  forcedRecords: PlanTuningDecision[],
  confirmRecords: PlanTuningDecision[],
): void {
  const { h, summary } = run;
  const records: PlanTuningDecision[] = [...forcedRecords];
  for (const c of calls) {
    const { variant, reason } = chosen.get(c)!;
    h.programs[c.program]!.kernels[c.index]!.variant = variant;
    if (variant !== c.base) summary.changed++;
    const alts = entries.get(c)!.alternatives;
    const mine = alts.find((a) => a.variant === variant);
    records.push({
      key: `${c.graph}:${c.index}:${c.kernel}`,
      choice: variant,
      micros: mine?.micros.length ? sum(mine.micros) : 0,
      reason: `${c.node}: ${reason}`,
      alternatives: alts.map((a) => ({
        variant: a.variant,
        micros: a.micros.length ? sum(a.micros) : 0,
        spread: a.spread.length ? Math.max(...a.spread) : 0,
        note: a.note,
      })),
    });
  }
  const order = new Map(h.programs.map((p, i) => [p.graph, i]));
  const rank = (r: PlanTuningDecision) => {
    const [g, k] = r.key.split(':');
    return [order.get(g!) ?? h.programs.length, k === 'confirm' ? 1e9 : Number(k)] as const;
  };
  h.tuning = [...records, ...confirmRecords].sort((a, b) => {
    const x = rank(a),
      y = rank(b);
    return x[0] - y[0] || x[1] - y[1];
  });
  h.options = { ...h.options, tuned: `${run.device.id} ${run.points.map(pointText).join(', ')}` };
  run.cache.save();
}

/** What a variant that prepares a weight (VariantSpec.prepares) keeps in memory for the call, for its decision's reason. */
function preparedNote(h: PlanHeader, c: Call, variant: string): string {
  const prep = kernelVariants(c.kernel).find((v) => v.name === variant)?.prepares;
  if (!prep) return '';
  const p = h.programs[c.program]!;
  const t = p.tensors[p.kernels[c.index]!.inputs[kernelSpec(c.kernel).inputs.findIndex((i) => i.name === prep.input)]!];
  const numel = t?.dims.reduce<number | undefined>((n, e) => {
    const d = constExpr(p, e);
    return n === undefined || d === undefined ? undefined : n * d;
  }, 1);
  const size = numel === undefined ? '' : ` (${((numel * 4) / 1e6).toFixed(1)} MB as float32)`;
  return `; it keeps ${prep.doc} in memory beside the weights${size}, once per weight`;
}

/** One alternative per variant from several calls' (same key, all measured now): the mean of their medians, the widest spread and round-to-round difference. */
function poolAlternatives(alts: CachedAlternative[]): CachedAlternative[] {
  const names = [...new Set(alts.map((a) => a.variant))];
  return names.map((variant) => {
    const mine = alts.filter((a) => a.variant === variant);
    const note = mine.find((a) => a.note)?.note ?? '';
    if (note) return { variant, micros: [], spread: [], note };
    const n = mine[0]!.micros.length;
    const at = (f: (a: CachedAlternative) => number[], agg: (xs: number[]) => number) =>
      Array.from({ length: n }, (_, i) => agg(mine.map((a) => f(a)[i]!)));
    const round = (x: number) => Math.round(x * 1000) / 1000;
    return {
      variant,
      micros: at(
        (a) => a.micros,
        (xs) => round(sum(xs) / xs.length),
      ),
      spread: at(
        (a) => a.spread,
        (xs) => round(Math.max(...xs)),
      ),
      between: at(
        (a) => a.between!,
        (xs) => round(Math.max(...xs)),
      ),
      note,
    };
  });
}

/**
 * A call's choice from its alternatives' times: the fastest in total over the points when it beats the default (the
 * call's variant before tuning) by MARGIN in total and is not slower at any point by more than MARGIN and the noise
 * there (how far either's rounds lay apart: a difference within it is not the variant's); else the default.
 */
export function chooseVariant(
  c: { base: string },
  e: CacheEntry,
  points: OperatingPoint[],
): { variant: string; reason: string } {
  const ran = e.alternatives.filter((a) => a.micros.length === points.length);
  const base = ran.find((a) => a.variant === c.base) ?? ran.find((a) => a.variant === 'auto');
  const skipped = e.alternatives.filter((a) => a.note).map((a) => a.variant);
  const notRun = skipped.length ? `; not runnable here: ${skipped.join(', ')}` : '';
  if (!base) return { variant: c.base, reason: `the default ${c.base} kept: it could not be measured${notRun}` };
  const best = [...ran].sort((a, b) => sum(a.micros) - sum(b.micros) || ran.indexOf(a) - ran.indexOf(b))[0]!;
  const at = (a: CachedAlternative) => points.map((pt, i) => `${pointText(pt)} ${ms(a.micros[i]!)}`).join(', ');
  if (best === base) return { variant: base.variant, reason: `${base.variant} is the fastest (${at(base)})${notRun}` };
  const gain = 1 - sum(best.micros) / sum(base.micros);
  const noiseAt = points.map((_, i) => Math.max(...[base, best].map((a) => (a.between?.[i] ?? 0) / a.micros[i]!)));
  const worseAt = points.findIndex((_, i) => best.micros[i]! > base.micros[i]! * (1 + Math.max(MARGIN, noiseAt[i]!)));
  if (gain < MARGIN)
    return {
      variant: base.variant,
      reason: `${best.variant} is within ${(MARGIN * 100).toFixed(0)}% of ${base.variant} (${at(best)} vs ${at(base)}): the default kept${notRun}`,
    };
  if (worseAt >= 0)
    return {
      variant: base.variant,
      reason: `${best.variant} is faster in total but slower at ${pointText(points[worseAt]!)} beyond its rounds' noise (${(noiseAt[worseAt]! * 100).toFixed(1)}%) (${at(best)} vs ${at(base)}): the default kept${notRun}`,
    };
  return {
    variant: best.variant,
    reason: `${best.variant} ${(gain * 100).toFixed(0)}% faster than ${base.variant} (${at(best)} vs ${at(base)})${notRun}`,
  };
}
