// A plan program's dimension expression as text (`2*batch+1`, `0`): what messages and generated types show.
import type { PlanProgram } from './types.ts';

export function exprText(p: PlanProgram, e: number): string {
  const terms = p.exprs[e]!.terms;
  if (terms.length === 0) return '0';
  return terms.map((t) => [t.coeff === 1 && t.factors.length ? '' : String(t.coeff), ...t.factors.map((f) => p.symbols[f]!.name)].filter((x) => x).join('*')).join('+').replace(/\+-/g, '-');
}
