// Dimension expressions of a program: interns symbolic Dims as polynomials over the program's runtime symbols.
import { PlancError, type Where } from '../compiler/diagnostics.ts';
import type { PlanExpr, PlanSymbol } from '../compiler/plan/types.ts';
import { dimStr, type Dim } from '../compiler/symbolic.ts';

export class ExprTable {
  readonly exprs: PlanExpr[] = [];
  private readonly index = new Map<string, number>();
  /** Symbol name → index into symbols. */
  private readonly symIndex = new Map<string, number>();

  constructor(readonly symbols: PlanSymbol[]) {
    symbols.forEach((s, i) => this.symIndex.set(s.name, i));
  }

  /** The expression index of a Dim; fails (naming `where`) when it uses a symbol no input binds or is not a polynomial. */
  intern(d: Dim, where: Where): number {
    const key = dimStr(d);
    const known = this.index.get(key);
    if (known !== undefined) return known;
    const terms =
      typeof d === 'number'
        ? d === 0
          ? []
          : [{ coeff: d, factors: [] as number[] }]
        : [...d.terms].map(([k, coeff]) => ({
            coeff,
            factors:
              k === ''
                ? []
                : k.split('*').map((name) => {
                    const i = this.symIndex.get(name);
                    if (i === undefined) {
                      throw new PlancError(
                        'PLANC_E404',
                        `dimension '${key}' depends on '${name}', which no graph input's shape determines (data-dependent sizes are not supported by plans)`,
                        where,
                      );
                    }
                    return i;
                  }),
          }));
    if (!Number.isSafeInteger(terms.reduce((a, t) => a + Math.abs(t.coeff), 0)))
      throw new PlancError('PLANC_E404', `dimension '${key}' is too large`, where);
    this.exprs.push({ terms });
    this.index.set(key, this.exprs.length - 1);
    return this.exprs.length - 1;
  }
}
