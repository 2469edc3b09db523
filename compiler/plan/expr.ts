// A plan program's dimension expressions (polynomials over its runtime symbols): their value, their constant value,
// their text for messages and generated types, and their text as a tuning-cache key. The one module that reads them.
import type { PlanExpr, PlanProgram } from './types.ts';

/** Value of an expression under symbol values (indexed like the program's symbols). */
export function evalExpr(e: PlanExpr, values: ArrayLike<number>): number {
  let s = 0;
  for (const t of e.terms) {
    let x = t.coeff;
    for (const f of t.factors) x *= values[f]!;
    s += x;
  }
  return s;
}

/** Value of program p's expression e under symbol values. */
export function exprValue(p: PlanProgram, e: number, values: ArrayLike<number>): number {
  return evalExpr(p.exprs[e]!, values);
}

/** A constant expression's value, or undefined when it depends on a runtime symbol. */
export function constExpr(p: PlanProgram, e: number): number | undefined {
  const terms = p.exprs[e]!.terms;
  if (terms.some((t) => t.factors.length > 0)) return undefined;
  return terms.reduce((s, t) => s + t.coeff, 0);
}

/** An expression as text over the program's symbol names (`2*batch_size*len+1`, `0`); `?e3` / `?s1` for bad indices. */
export function exprText(p: PlanProgram, e: number): string {
  const terms = p.exprs[e]?.terms;
  if (!terms) return `?e${e}`;
  if (terms.length === 0) return '0';
  return terms
    .map((t) =>
      [
        t.coeff === 1 && t.factors.length ? '' : String(t.coeff),
        ...t.factors.map((f) => p.symbols[f]?.name ?? `?s${f}`),
      ]
        .filter((x) => x)
        .join('*'),
    )
    .join('+')
    .replace(/\+-/g, '-');
}

/** An expression as a tuning-cache key (`1*batch_size+2`, coefficients always written): the key format tune caches hold. */
export function exprKey(p: PlanProgram, e: number): string {
  return (
    p.exprs[e]!.terms.map((x) => `${x.coeff}${x.factors.map((f) => `*${p.symbols[f]!.name}`).join('')}`).join('+') ||
    '0'
  );
}
