// The CTranslate2 side of bench translate: runs bench/ct2/run.py on the export's HF checkpoint where python3 imports ctranslate2 and transformers.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeHfCheckpoint } from './hf-checkpoint.ts';

/** One timed CTranslate2 translation (the fastest of the rounds) and the ids it gave. */
export interface Ct2Row {
  quantization: string;
  computeType: string;
  batch: number;
  sentences: number;
  seconds: number;
  sentencesPerS: number;
  tokensPerS: number;
  tokens: number;
  ids: number[][];
}

export type Ct2Result = { version: string; threads: number; rows: Ct2Row[] } | { skipped: string };

const RUN_PY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'run.py');

/** The Python the comparison runs (PLANC_PYTHON, else python3 on PATH). */
export function ct2Python(): string {
  return process.env.PLANC_PYTHON || 'python3';
}

/**
 * CTranslate2 float32 and int8 on the export (greedy, batch 1 on the first 200 test sentences, batch 32 on 1,000),
 * or why it was skipped: python3 cannot import ctranslate2 and transformers, the export does not map to a Hugging
 * Face checkpoint, or run.py failed (its stderr is passed through).
 */
export function runCt2(exportDir: string, threads: number, reps: number, maxLength: number): Ct2Result {
  const py = ct2Python();
  const probe = spawnSync(py, ['-c', 'import ctranslate2, transformers'], { stdio: 'ignore' });
  if (probe.status !== 0) return { skipped: `${py} cannot import ctranslate2/transformers` };
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-bench-ct2-'));
  try {
    const ckpt = path.join(tmp, 'hf');
    try {
      writeHfCheckpoint(exportDir, ckpt);
    } catch (e) {
      return { skipped: `no Hugging Face checkpoint from the export: ${(e as Error).message}` };
    }
    const args = [RUN_PY, ckpt, path.join(exportDir, 'test_ids.json'), path.join(tmp, 'work')];
    args.push('--threads', String(threads), '--reps', String(reps), '--max-length', String(maxLength));
    const r = spawnSync(py, args, { stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 28, encoding: 'utf8' });
    if (r.status !== 0) return { skipped: `bench/ct2/run.py failed (exit ${r.status ?? r.signal})` };
    return JSON.parse(r.stdout.trim().split('\n').pop()!);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
