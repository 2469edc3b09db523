// What `planc optimize --vocab` asks for: a lexical shortlist file or calibrated clusters, parsed from the option's text.
import { PlancError } from '../diagnostics.ts';

export type VocabSpec =
  | { method: 'shortlist'; file: string; first?: number; best?: number }
  | { method: 'clusters'; clusters: number; topK: number };

const usage = (msg: string): never => { throw new PlancError('PLANC_E301', `--vocab: ${msg} (shortlist=FILE[,first=N,best=N] or clusters=R,K)`); };

/** Parses `shortlist=FILE[,first=100,best=100]` or `clusters=R,K` (K defaults to 3). */
export function parseVocabSpec(s: string): VocabSpec {
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
    const clusters = Number(cl[1]), topK = cl[2] === undefined ? 3 : Number(cl[2]);
    if (clusters < 1) usage('R must be ≥ 1');
    if (topK < 1 || topK > 64) usage('K must be in [1, 64]');
    return { method: 'clusters', clusters, topK };
  }
  return usage(`cannot read '${s}'`);
}
