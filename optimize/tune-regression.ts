// Whether a tuned plan's end-to-end times regress on the untuned plan's beyond this machine's noise: the difference of
// the untuned plan from its second copy, measured beside them, in total or at one operating point.
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

export interface Regression {
  regressed: boolean;
  /** The first point where the tuned times exceed the untuned ones beyond the point margin and the noise there (-1: none). */
  worseAt: number;
  /** |second copy − untuned| / untuned, in total and per point (0 without a second copy). */
  noise: number;
  noiseAt: number[];
}

/**
 * Times per operating point (any unit) of the untuned plan, the tuned one and the untuned one's second copy. A
 * regression: the total beyond `total` (when given) and the total noise, or one point beyond `point` and its noise; a
 * gain at the most rows must not hide a loss at one row.
 */
export function regression(
  untuned: number[],
  tuned: number[],
  again: number[] | undefined,
  margins: { total?: number; point: number },
): Regression {
  const noise = again ? Math.abs(sum(again) - sum(untuned)) / sum(untuned) : 0;
  const noiseAt = untuned.map((u, i) => (again ? Math.abs(again[i]! - u) / u : 0));
  const worseAt = untuned.findIndex((u, i) => tuned[i]! > u * (1 + Math.max(margins.point, noiseAt[i]!)));
  const total = margins.total !== undefined && sum(tuned) > sum(untuned) * (1 + Math.max(margins.total, noise));
  return { regressed: total || worseAt >= 0, worseAt, noise, noiseAt };
}
