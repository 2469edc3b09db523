// The lines `planc optimize --fast` and `planc inspect` print about a plan's fast search (its header, compiler/plan).
import { fastPointName, type PlanFast, type PlanFastPoint } from '../compiler/plan/types.ts';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The lines optimize and inspect print: the choice, then every measured combination (the chosen one marked). */
export function formatFastReport(f: PlanFast): string[] {
  const name = (p: PlanFastPoint) => fastPointName(p).padEnd(34);
  return [
    `fast: ${f.curve.length} combinations measured against the float32 plan on ${f.evalSentences} sentences of ${f.evalSource}, timed on ${f.timeSentences} at batch ${f.timeBatch}; gate ${f.gate}`,
    `  chosen: ${f.choice}`,
    ...f.curve.map(
      (p) =>
        `  ${p.chosen ? '*' : ' '} ${name(p)} identical ${pct(p.identicalSentences).padStart(6)}, top-1 ${pct(p.top1Agreement).padStart(6)}${f.hasBleu ? `, BLEU ${p.bleu.toFixed(2)}` : ''}; ${p.seconds ? `${p.seconds.toPrecision(3)} s, ${(f.fp32Seconds / p.seconds).toFixed(2)}x float32` : 'not timed'}; gate ${p.gatePassed ? 'holds' : 'fails'}`,
    ),
    ...(f.screen.length
      ? [
          `  clusters screened on float32 products (emulated, batch-1 masks; identical, gate): ${f.screen.map((p) => `R${p.clusters} K${p.topK} ${pct(p.identicalSentences)} ${p.gatePassed ? 'holds' : 'fails'}`).join(', ')}`,
        ]
      : []),
    ...f.notes
      .split('\n')
      .filter((x) => x)
      .map((n) => `  ${n}`),
  ];
}

/** `planc inspect --json`'s fast entry. */
export function fastInspect(f: PlanFast) {
  return {
    evalSource: f.evalSource,
    evalSentences: f.evalSentences,
    calibrationFile: f.calibrationFile || null,
    gate: f.gate,
    bleuFp32: f.hasBleu ? f.bleuFp32 : null,
    timeBatch: f.timeBatch,
    timeSentences: f.timeSentences,
    fp32Seconds: f.fp32Seconds,
    choice: f.choice,
    curve: f.curve.map((p) => ({
      ...p,
      bleu: f.hasBleu ? p.bleu : null,
      seconds: p.seconds || null,
      speedup: p.seconds ? f.fp32Seconds / p.seconds : null,
    })),
    notes: f.notes,
    screen: f.screen,
  };
}
