// Zoo families: greedy translation with the fused plan (default optimize) vs the --no-fuse plan, same run, same ids.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { machineFacts } from './machine.ts';

const MAX_LEN = 32;
/** The 20 reference sources, repeated: enough work per measurement on models this small. */
const REPEAT = 5;
const BATCHES = [1, 16];
const ROUNDS = 3;

interface Row {
  family: string;
  batch: number;
  sentences: number;
  fusedS: number;
  unfusedS: number;
  speedup: number;
  identical: number;
}

function optimize(dir: string, out: string, extra: string[]): void {
  const r = spawnSync(
    process.execPath,
    [path.join(REPO_ROOT, 'bin', 'planc.js'), 'optimize', dir, '-o', out, '--quiet', ...extra],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`optimize ${dir} ${extra.join(' ')} failed: ${r.stderr}`);
}

async function seconds(plan: Plan, ids: number[][], batch: number): Promise<{ s: number; out: number[][] }> {
  const t0 = performance.now();
  const out = (await translateIds(plan, ids, { beamSize: 1, batchSize: batch, maxLength: MAX_LEN })).map((r) => r.ids);
  return { s: (performance.now() - t0) / 1000, out };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function benchZoo(): Promise<void> {
  const zoo = sharedDir() && path.join(sharedDir()!, 'models', 'zoo');
  if (!zoo || !fs.existsSync(zoo)) {
    console.log('zoo bench skipped: ../shared/models/zoo is missing');
    return;
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-bench-zoo-'));
  const rows: Row[] = [];
  console.log(
    `zoo greedy translation (max length ${MAX_LEN}, reference sources x${REPEAT}), fused vs --no-fuse plan, median of ${ROUNDS} interleaved rounds`,
  );
  console.log('family   batch  sentences   fused s  unfused s  fused speed-up  identical');
  try {
    for (const family of fs
      .readdirSync(zoo)
      .filter((f) => fs.existsSync(path.join(zoo, f, 'reference.json')))
      .sort()) {
      const dir = path.join(zoo, family);
      const ref = JSON.parse(fs.readFileSync(path.join(dir, 'reference.json'), 'utf8')) as { src_ids: number[][] };
      const ids = Array.from({ length: REPEAT }, () => ref.src_ids).flat();
      optimize(dir, path.join(tmp, `${family}.plan`), []);
      optimize(dir, path.join(tmp, `${family}-nofuse.plan`), ['--no-fuse']);
      const fused = await loadPlan(path.join(tmp, `${family}.plan`));
      const unfused = await loadPlan(path.join(tmp, `${family}-nofuse.plan`));
      try {
        for (const batch of BATCHES) {
          await seconds(fused, ids.slice(0, batch), batch);
          await seconds(unfused, ids.slice(0, batch), batch);
          const f: number[] = [],
            u: number[] = [];
          let identical = 0;
          for (let r = 0; r < ROUNDS; r++) {
            const a = await seconds(fused, ids, batch);
            const b = await seconds(unfused, ids, batch);
            f.push(a.s);
            u.push(b.s);
            identical = a.out.filter((x, i) => x.join() === b.out[i]!.join()).length;
          }
          const row: Row = {
            family,
            batch,
            sentences: ids.length,
            fusedS: median(f),
            unfusedS: median(u),
            speedup: median(u) / median(f),
            identical,
          };
          rows.push(row);
          console.log(
            `${family.padEnd(8)} ${String(batch).padStart(5)} ${String(ids.length).padStart(10)} ${row.fusedS.toFixed(3).padStart(9)} ${row.unfusedS.toFixed(3).padStart(10)} ${`${row.speedup.toFixed(2)}x`.padStart(15)} ${`${identical}/${ids.length}`.padStart(10)}`,
          );
        }
      } finally {
        fused.close();
        unfused.close();
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const out = path.join(REPO_ROOT, 'bench', 'results', 'zoo.jsonl');
  fs.appendFileSync(
    out,
    JSON.stringify({ bench: 'zoo', maxLength: MAX_LEN, rounds: ROUNDS, rows, ...machineFacts() }) + '\n',
  );
  console.log(`appended to ${path.relative(process.cwd(), out)}`);
}
