// What `planc optimize --vocab` asks for: a lexical shortlist file or calibrated clusters, parsed from the option's text.
import { fail } from '../diagnostics-catalog.ts';

export type VocabSpec =
  | { method: 'shortlist'; file: string; first?: number; best?: number }
  | { method: 'clusters'; clusters: number; topK: number }
  | { method: 'auto'; clusters: number[]; topK: number[] };

/** The R × K grid `--vocab auto` measures (clusters; ids per calibration state): few clusters with many ids first. */
export const AUTO_CLUSTERS = [64, 128, 256] as const;
export const AUTO_TOPK = [4, 8, 16, 32] as const;

const usage = (msg: string): never => {
  fail('optionProblem', {
    option: 'vocab',
    why: `${msg} (shortlist=FILE[,first=N,best=N], clusters=R,K or auto[=R:R:...,K:K:...])`,
  });
};

/** A list of positive integers separated by ':' (one of auto's axes). */
const axis = (text: string, what: string, max: number): number[] => {
  const xs = text.split(':').map(Number);
  if (!xs.length || xs.some((x) => !Number.isInteger(x) || x < 1 || x > max))
    usage(`auto's ${what} must be integers in [1, ${max}] separated by ':', got '${text}'`);
  return [...new Set(xs)].sort((a, b) => a - b);
};

/**
 * Parses `shortlist=FILE[,first=100,best=100]`, `clusters=R,K` (K defaults to 3) or `auto[=R:R:...,K:K:...]` (the
 * clusters grid the tuner measures under the accuracy gate; default AUTO_CLUSTERS × AUTO_TOPK).
 */
export function parseVocabSpec(s: string): VocabSpec {
  const auto = /^auto(?:=([^,]+),([^,]+))?$/.exec(s);
  if (auto) {
    return {
      method: 'auto',
      clusters: auto[1] ? axis(auto[1], 'R', 1 << 20) : [...AUTO_CLUSTERS],
      topK: auto[2] ? axis(auto[2], 'K', 64) : [...AUTO_TOPK],
    };
  }
  const sl = /^shortlist=(.+)$/.exec(s);
  if (sl) {
    const parts = sl[1]!.split(',');
    const opts: Record<string, number> = {};
    while (parts.length > 1 && /^(first|best)=\d+$/.test(parts[parts.length - 1]!)) {
      const [k, v] = parts.pop()!.split('=') as [string, string];
      opts[k] = Number(v);
    }
    const file = parts.join(',');
    if (!file) usage('no shortlist file');
    return { method: 'shortlist', file, first: opts.first, best: opts.best };
  }
  const cl = /^clusters=(\d+)(?:,(\d+))?$/.exec(s);
  if (cl) {
    const clusters = Number(cl[1]),
      topK = cl[2] === undefined ? 3 : Number(cl[2]);
    if (clusters < 1) usage('R must be ≥ 1');
    if (topK < 1 || topK > 64) usage('K must be in [1, 64]');
    return { method: 'clusters', clusters, topK };
  }
  return usage(`cannot read '${s}'`);
}
