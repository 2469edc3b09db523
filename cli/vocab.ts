// The lines `planc optimize` and `planc inspect` print about a plan's vocabulary rewrite (its header, compiler/plan).
import type { PlanVocab } from '../compiler/plan/types.ts';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The lines `planc optimize` prints about the vocab rewrite. */
export function formatVocabReport(v: PlanVocab): string[] {
  if (v.curve.length && !v.clusters)
    return [
      `vocab: auto, ${v.curve.length} R × K points measured on ${v.evalSentences} sentences of ${v.evalSource}: ${v.choice}`,
      ...curveLines(v),
    ];
  const lines = [
    v.method === 'shortlist'
      ? `vocab: shortlist ${v.shortlistFile} (${v.shortlistFormat}, first ${v.first}, best ${v.best}, ${v.offsets.length - 1} source ids, ${v.targets.length} entries)`
      : `vocab: clusters R ${v.clusters}, K ${v.topK}, calibrated on ${v.calibrationSentences} sentences of ${v.calibrationFile} (${v.calibrationStates} states; k-means ${v.kmeansIterations} iterations${v.kmeansConverged ? ', converged' : ''}, ${v.emptyClusters} empty clusters); calibration active fraction ${pct(v.calibrationActiveMean)}`,
  ];
  if (v.adjustments) lines.push(`  adjusted: ${v.adjustments}`);
  if (v.evalSentences) {
    lines.push(
      `  on ${v.evalSentences} held-out sentences (${v.evalSource}, ${v.evalMode}, batch-1 masks): active ${pct(v.activeMean)} mean, ${pct(v.activeMax)} max of the vocabulary per step; top-1 agreement ${pct(v.top1Agreement)}; identical ${pct(v.identicalSentences)}` +
        (v.hasBleu ? `; BLEU ${v.bleu.toFixed(2)} (full projection ${v.bleuFull.toFixed(2)})` : ''),
    );
  } else lines.push('  quality: not measured (give --eval-src [--eval-ref] held-out text)');
  if (v.curve.length) lines.push(`  auto: ${v.choice}`, ...curveLines(v));
  return lines;
}

/** --vocab auto's measured points, one line each (the chosen one marked). */
function curveLines(v: PlanVocab): string[] {
  return v.curve.map(
    (p) =>
      `    ${p.clusters === v.clusters && p.topK === v.topK ? '*' : ' '} R ${String(p.clusters).padStart(5)} K ${String(p.topK).padStart(2)}: active ${pct(p.activeMean)} mean, ${pct(p.activeMax)} max; top-1 ${pct(p.top1Agreement)}; identical ${pct(p.identicalSentences)}${v.hasBleu ? `; BLEU ${p.bleu.toFixed(2)}` : ''}; ${p.cost.toFixed(0)} dot products a row; gate ${p.gatePassed ? 'holds' : 'fails'}`,
  );
}

/** `planc inspect --json`'s vocab entry. */
export function vocabInspect(v: PlanVocab) {
  return {
    method: v.method,
    activeMean: v.activeMean,
    activeMax: v.activeMax,
    top1Agreement: v.top1Agreement,
    identicalSentences: v.identicalSentences,
    bleu: v.hasBleu ? v.bleu : null,
    bleuFull: v.hasBleu ? v.bleuFull : null,
    ...(v.curve.length ? { clusters: v.clusters, topK: v.topK, choice: v.choice, curve: v.curve } : {}),
  };
}
