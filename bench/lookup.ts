// `npm run bench -- lookup`: the default plan's multi-token step on es-en — what it costs greedy at one token (batch 1
// and 32, against a --step-tokens 1 plan), and drafted decoding at batch 1 (n-gram lookup drafts, verified: output =
// greedy) with accepted tokens per step and wall clock per kind of sentence, same run. bench/results/lookup.jsonl.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT } from '../compiler/paths.ts';
import { onJacobiStats, type JacobiBatchStats } from '../runtime/decode/jacobi.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { machineFacts } from './machine.ts';
import { esenDir } from './shared-models.ts';

const PLANC = path.join(REPO_ROOT, 'bin', 'planc.js');
const MAX_LEN = 64;
/** Draft blocks measured: the last final token and block - 1 drafted ones a step. */
const BLOCKS = [3, 5, 8];
/** Interleaved rounds of the step-tokens cost (CPU-time medians). */
const ROUNDS = 5;

interface Sentence {
  src: number[];
  text: string;
  greedyMs: number;
  out: string;
  /** Per block: ms, decoder runs, tokens, identical to greedy. */
  lookup: { ms: number; runs: number; tokens: number; same: boolean }[];
}

/** `planc optimize` of es-en with extra flags (the plan a user gets). */
function optimize(dir: string, file: string, extra: string[]): void {
  const r = spawnSync(
    process.execPath,
    [PLANC, 'optimize', dir, '-o', file, '--quiet', '--max-batch', '32', '--max-tgt-len', String(MAX_LEN), ...extra],
    { stdio: 'inherit' },
  );
  if (r.status !== 0) throw new Error(`planc optimize ${extra.join(' ')} failed`);
}

/** Greedy CPU seconds of `ids` at a batch size on each plan, ROUNDS interleaved rounds, medians; outputs compared. */
async function stepCost(a: Plan, b: Plan, ids: number[][], batchSize: number) {
  const run = async (p: Plan) => {
    const c0 = process.cpuUsage();
    const out = await translateIds(p, ids, { batchSize, maxLength: MAX_LEN });
    const c = process.cpuUsage(c0);
    return { cpu: (c.user + c.system) / 1e6, out: out.map((r) => r.ids.join()) };
  };
  await run(a);
  await run(b);
  const ta: number[] = [];
  const tb: number[] = [];
  let identical = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const x = await run(a);
    const y = await run(b);
    ta.push(x.cpu);
    tb.push(y.cpu);
    identical = x.out.filter((o, j) => o === y.out[j]).length;
  }
  const med = (v: number[]) => [...v].sort((p, q) => p - q)[v.length >> 1]!;
  return {
    batch: batchSize,
    sentences: ids.length,
    oneTokenPlanCpu: med(ta),
    defaultPlanCpu: med(tb),
    ratio: med(tb) / med(ta),
    identical,
  };
}

/** One sentence through a strategy at batch 1: ms, output, and (lookup) its decoder runs and tokens. */
async function one(p: Plan, src: number[], strategy: string, block: number) {
  let stats: JacobiBatchStats | undefined;
  onJacobiStats((s) => (stats = s));
  try {
    const t0 = performance.now();
    const [r] = await translateIds(p, [src], { batchSize: 1, maxLength: MAX_LEN, strategy, jacobiBlock: block });
    const ms = performance.now() - t0;
    const s = stats?.sentences[0];
    return { ms, out: r!.ids.join(), runs: s?.iterations ?? 0, tokens: s?.tokens ?? 0 };
  } finally {
    onJacobiStats(undefined);
  }
}

/** Kinds of sentence the table splits by: where copying from the source or the output so far can pay. */
const KINDS: [string, (s: Sentence) => boolean][] = [
  ['all', () => true],
  ['digits in the source', (s) => /\d/.test(s.text)],
  ['no digits', (s) => !/\d/.test(s.text)],
  ['source ≥ 20 tokens', (s) => s.src.length >= 20],
  ['source < 8 tokens', (s) => s.src.length < 8],
];

export async function benchLookup(): Promise<void> {
  const dir = esenDir('lookup');
  if (!dir) return;
  const cap = process.argv[3] === undefined ? 1000 : Number(process.argv[3]);
  if (!(cap >= 1)) throw new Error(`usage: npm run bench -- lookup [SENTENCES], got ${process.argv[3]}`);
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(dir, 'test_ids.json'), 'utf8')).src_ids.slice(0, cap);
  const texts = fs.readFileSync(path.join(dir, 'test.es'), 'utf8').split('\n').slice(0, ids.length);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-bench-lookup-'));
  optimize(dir, path.join(tmp, 'default.plan'), []);
  optimize(dir, path.join(tmp, 'step1.plan'), ['--step-tokens', '1']);
  const def = await loadPlan(path.join(tmp, 'default.plan'));
  const step1 = await loadPlan(path.join(tmp, 'step1.plan'));
  const stepTokens = def.header.decoding.stepTokens ?? 1;
  try {
    console.log(
      `es-en; the default plan takes up to ${stepTokens} tokens a step; greedy CPU seconds, median of ${ROUNDS} interleaved rounds`,
    );
    const costs = [await stepCost(step1, def, ids.slice(0, 200), 1), await stepCost(step1, def, ids, 32)];
    for (const c of costs)
      console.log(
        `  batch ${c.batch}, ${c.sentences} sentences: --step-tokens 1 plan ${c.oneTokenPlanCpu.toFixed(2)} s, default plan ${c.defaultPlanCpu.toFixed(2)} s (x${c.ratio.toFixed(3)}), identical ${c.identical}/${c.sentences}`,
      );

    // batch 1: each sentence greedy, then lookup at every block, alternating (neighbours share the machine's state)
    for (const s of ids.slice(0, 8)) for (const b of BLOCKS) await one(def, s, 'lookup', b);
    const sentences: Sentence[] = [];
    for (const [i, src] of ids.entries()) {
      const g = await one(def, src, 'greedy', 3);
      const lookup = [];
      for (const b of BLOCKS) {
        const l = await one(def, src, 'lookup', b);
        lookup.push({ ms: l.ms, runs: l.runs, tokens: l.tokens, same: l.out === g.out });
      }
      sentences.push({ src, text: texts[i] ?? '', greedyMs: g.ms, out: g.out, lookup });
    }
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const rows = [];
    console.log(
      `batch 1, ${sentences.length} sentences: greedy vs lookup drafts (block b: the last final token + b - 1 drafted)`,
    );
    console.log('  sentences                 n     block  tokens/step  greedy s  lookup s  speed-up  identical');
    for (const [kind, pick] of KINDS) {
      const set = sentences.filter(pick);
      if (set.length === 0) continue;
      for (const [bi, block] of BLOCKS.entries()) {
        const greedy = sum(set.map((s) => s.greedyMs)) / 1000;
        const lookup = sum(set.map((s) => s.lookup[bi]!.ms)) / 1000;
        const tokens = sum(set.map((s) => s.lookup[bi]!.tokens));
        const runs = sum(set.map((s) => s.lookup[bi]!.runs));
        const row = {
          kind,
          sentences: set.length,
          block,
          tokensPerStep: tokens / runs,
          greedySeconds: greedy,
          lookupSeconds: lookup,
          speedup: greedy / lookup,
          identical: set.filter((s) => s.lookup[bi]!.same).length,
        };
        rows.push(row);
        console.log(
          `  ${kind.padEnd(22)} ${String(set.length).padStart(5)}  ${String(block).padStart(8)}  ${row.tokensPerStep.toFixed(3).padStart(11)}  ${greedy.toFixed(2).padStart(8)}  ${lookup.toFixed(2).padStart(8)}  ${row.speedup.toFixed(2).padStart(8)}  ${row.identical}/${set.length}`,
        );
      }
    }
    // where it wins: sentences by their own accepted tokens per step (best block)
    const best = BLOCKS.length - 1;
    const bands: [string, number, number][] = [
      ['< 1.2 tokens/step', 0, 1.2],
      ['1.2-1.5', 1.2, 1.5],
      ['1.5-2', 1.5, 2],
      ['≥ 2', 2, Infinity],
    ];
    console.log(`  by each sentence's tokens per step (block ${BLOCKS[best]}):`);
    const byBand = bands.map(([name, lo, hi]) => {
      const set = sentences.filter((s) => {
        const t = s.lookup[best]!.tokens / s.lookup[best]!.runs;
        return t >= lo && t < hi;
      });
      const greedy = sum(set.map((s) => s.greedyMs));
      const lookup = sum(set.map((s) => s.lookup[best]!.ms));
      console.log(
        `    ${name.padEnd(18)} ${String(set.length).padStart(5)} sentences  speed-up ${set.length ? (greedy / lookup).toFixed(2) : '-'}`,
      );
      return { band: name, sentences: set.length, speedup: set.length ? greedy / lookup : null };
    });
    const out = path.join(REPO_ROOT, 'bench', 'results', 'lookup.jsonl');
    fs.appendFileSync(
      out,
      `${JSON.stringify({ bench: 'lookup', model: 'es-en', maxLength: MAX_LEN, stepTokens, stepCost: costs, rows, byBand, ...machineFacts() })}\n`,
    );
    console.log(`appended to ${path.relative(process.cwd(), out)}`);
  } finally {
    def.close();
    step1.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
