// Log-softmax in float64 of one vocabulary row of logits, as the reference decoders score tokens.

/** log_softmax(values[start .. start + v)), computed in float64 (max-shifted). */
export function logSoftmax(values: ArrayLike<number>, start: number, v: number): Float64Array {
  const row = new Float64Array(v);
  for (let i = 0; i < v; i++) row[i] = values[start + i]!;
  let max = -Infinity;
  for (const x of row) max = Math.max(max, x);
  let sum = 0;
  for (const x of row) sum += Math.exp(x - max);
  const lse = max + Math.log(sum);
  return row.map((x) => x - lse);
}
