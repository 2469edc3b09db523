// Symbolic dimensions: integer polynomials over named symbols (batch, src_len, ...), kept in a canonical form.
/** A dimension: a known integer or a symbolic expression. */
export type Dim = number | Sym;

/** A canonical polynomial: monomial key ('' for the constant, else sorted symbol names joined by '*') → coefficient. */
export class Sym {
  readonly key: string;
  constructor(readonly terms: ReadonlyMap<string, number>) {
    this.key = render(terms);
  }
  toString(): string {
    return this.key;
  }
}

function render(terms: ReadonlyMap<string, number>): string {
  const keys = [...terms.keys()].filter((k) => k !== '').sort();
  let s = '';
  for (const k of keys) {
    const c = terms.get(k)!;
    const mag = Math.abs(c);
    const body = mag === 1 ? k : `${k}*${mag}`;
    s += s === '' ? (c < 0 ? `-${body}` : body) : c < 0 ? `-${body}` : `+${body}`;
  }
  const c0 = terms.get('') ?? 0;
  if (c0 !== 0) s += c0 < 0 ? `${c0}` : s === '' ? `${c0}` : `+${c0}`;
  return s;
}

function make(terms: Map<string, number>): Dim {
  for (const [k, v] of [...terms]) if (v === 0) terms.delete(k);
  const keys = [...terms.keys()];
  if (keys.length === 0) return 0;
  if (keys.length === 1 && keys[0] === '') return terms.get('')!;
  return new Sym(terms);
}

function termsOf(d: Dim): Map<string, number> {
  if (typeof d === 'number') return new Map(d === 0 ? [] : [['', d]]);
  return new Map(d.terms);
}

/** A dimension named by a symbol. Names are atoms: any string, '(a+1)/2' included. */
export function sym(name: string): Sym {
  return new Sym(new Map([[name, 1]]));
}

export function isSym(d: Dim): d is Sym {
  return typeof d !== 'number';
}

export function dimAdd(a: Dim, b: Dim): Dim {
  if (typeof a === 'number' && typeof b === 'number') return a + b;
  const t = termsOf(a);
  for (const [k, v] of termsOf(b)) t.set(k, (t.get(k) ?? 0) + v);
  return make(t);
}

export function dimNeg(a: Dim): Dim {
  if (typeof a === 'number') return -a;
  return make(new Map([...a.terms].map(([k, v]) => [k, -v])));
}

export function dimSub(a: Dim, b: Dim): Dim {
  return dimAdd(a, dimNeg(b));
}

function mulKeys(a: string, b: string): string {
  if (a === '') return b;
  if (b === '') return a;
  return [...a.split('*'), ...b.split('*')].sort().join('*');
}

export function dimMul(a: Dim, b: Dim): Dim {
  if (typeof a === 'number' && typeof b === 'number') return a * b;
  const t = new Map<string, number>();
  for (const [ka, va] of termsOf(a))
    for (const [kb, vb] of termsOf(b)) {
      const k = mulKeys(ka, kb);
      t.set(k, (t.get(k) ?? 0) + va * vb);
    }
  return make(t);
}

/** Floor division. Exact when the divisor is a number dividing every coefficient, or the same expression; else an atom. */
export function dimDiv(a: Dim, b: Dim): Dim {
  if (typeof a === 'number' && typeof b === 'number') return Math.floor(a / b);
  if (typeof b === 'number') {
    if (b === 1) return a;
    const t = termsOf(a);
    if ([...t.values()].every((v) => v % b === 0)) return make(new Map([...t].map(([k, v]) => [k, v / b])));
  }
  if (dimEq(a, b)) return 1;
  return sym(`(${dimStr(a)})/(${dimStr(b)})`);
}

/** Remainder (floor semantics); exact only for numbers and exact divisions. */
export function dimMod(a: Dim, b: Dim): Dim {
  if (typeof a === 'number' && typeof b === 'number') return ((a % b) + b) % b;
  return dimSub(a, dimMul(dimDiv(a, b), b));
}

export function dimEq(a: Dim, b: Dim): boolean {
  if (typeof a === 'number' || typeof b === 'number') return a === b;
  return a.key === b.key;
}

export function dimStr(d: Dim): string {
  return typeof d === 'number' ? String(d) : d.key;
}

/** Value of a dimension under symbol bindings, or undefined when a symbol is unbound or an atom cannot be evaluated. */
export function dimEval(d: Dim, bind: ReadonlyMap<string, number>): number | undefined {
  if (typeof d === 'number') return d;
  let s = 0;
  for (const [k, c] of d.terms) {
    if (k === '') {
      s += c;
      continue;
    }
    let p = c;
    for (const name of k.split('*')) {
      const v = bind.get(name);
      if (v === undefined) return undefined;
      p *= v;
    }
    s += p;
  }
  return s;
}

/** A dimension with symbol `name` bound to `value` (the other symbols kept). */
export function dimBind(d: Dim, name: string, value: number): Dim {
  if (typeof d === 'number') return d;
  const t = new Map<string, number>();
  for (const [k, c] of d.terms) {
    const names = k === '' ? [] : k.split('*');
    const rest = names.filter((x) => x !== name);
    const key = rest.join('*');
    t.set(key, (t.get(key) ?? 0) + c * value ** (names.length - rest.length));
  }
  return make(t);
}

/**
 * Bounds of a dimension expression that hold for every value of its symbols. Symbols name sizes (or values derived
 * from sizes), so each is ≥ 0: a polynomial whose non-constant coefficients are all ≥ 0 is ≥ its constant, one whose
 * coefficients are all ≤ 0 is ≤ its constant.
 */
export function dimRange(d: Dim): { min?: number; max?: number } {
  if (typeof d === 'number') return { min: d, max: d };
  let pos = false;
  let neg = false;
  for (const [k, c] of d.terms)
    if (k !== '') {
      if (c > 0) pos = true;
      else neg = true;
    }
  const c0 = d.terms.get('') ?? 0;
  return { ...(neg ? {} : { min: c0 }), ...(pos ? {} : { max: c0 }) };
}

/** Sign of a - b when it is decided for every value of the symbols: -1, 0 or 1; undefined when not. */
export function dimCompare(a: Dim, b: Dim): -1 | 0 | 1 | undefined {
  const r = dimRange(dimSub(a, b));
  if (r.min !== undefined && r.max !== undefined && r.min === r.max) return Math.sign(r.min) as -1 | 0 | 1;
  if (r.min !== undefined && r.min > 0) return 1;
  if (r.max !== undefined && r.max < 0) return -1;
  return undefined;
}

/** The symbol names a dimension uses. */
export function dimSymbols(d: Dim): string[] {
  if (typeof d === 'number') return [];
  return [...new Set([...d.terms.keys()].filter((k) => k !== '').flatMap((k) => k.split('*')))];
}

/** Broadcast of two dims: equal, or one is 1; undefined when they cannot be proven compatible here. */
export function dimBroadcast(a: Dim, b: Dim): Dim | undefined {
  if (dimEq(a, b)) return a;
  if (a === 1) return b;
  if (b === 1) return a;
  return undefined;
}

export function shapeStr(s: readonly Dim[] | undefined): string {
  return s === undefined ? '?' : `[${s.map(dimStr).join(',')}]`;
}

/** Product of dims. */
export function dimProduct(s: readonly Dim[]): Dim {
  let p: Dim = 1;
  for (const d of s) p = dimMul(p, d);
  return p;
}

let unknownCounter = 0;
/** A fresh symbol for a dimension inference cannot determine (data-dependent sizes such as NonZero's count). */
export function unknownDim(): Sym {
  return sym(`unk${unknownCounter++}`);
}

/** Whether a symbol name is one unknownDim() made (not a model's). */
export function isUnknownSymbol(name: string): boolean {
  return /^unk\d+$/.test(name);
}

/**
 * Parses a dim_param such as `batch`, `past_decoder_sequence_length + 1` or `2*seq` into a Dim. Anything that is
 * not a sum of products of names and integers stays one atom named by the trimmed text.
 */
export function parseDim(text: string): Dim {
  const tokens = text.match(/[A-Za-z_][\w.]*|\d+|[+\-*]|\S/g) ?? [];
  let pos = 0;
  const atom = (): Dim | undefined => {
    const t = tokens[pos++];
    if (t === undefined) return undefined;
    if (/^\d+$/.test(t)) return Number(t);
    if (/^[A-Za-z_]/.test(t)) return sym(t);
    return undefined;
  };
  const product = (): Dim | undefined => {
    let d = atom();
    while (d !== undefined && tokens[pos] === '*') {
      pos++;
      const r = atom();
      d = r === undefined ? undefined : dimMul(d, r);
    }
    return d;
  };
  let sign = 1;
  if (tokens[pos] === '-') {
    sign = -1;
    pos++;
  }
  let acc = product();
  if (acc !== undefined && sign < 0) acc = dimNeg(acc);
  while (acc !== undefined && pos < tokens.length) {
    const op = tokens[pos++];
    const r = product();
    if (r === undefined || (op !== '+' && op !== '-')) {
      acc = undefined;
      break;
    }
    acc = op === '+' ? dimAdd(acc, r) : dimSub(acc, r);
  }
  return acc ?? sym(text.trim());
}
