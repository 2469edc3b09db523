// Text operators on string tensors: StringNormalizer, StringConcat, StringSplit, RegexFullMatch, and TfIdfVectorizer (n-gram counts).
import { unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { broadcastDims, broadcastIndex, sizeOf, Tensor } from '../../compiler/tensor.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { broadcastShapes, need } from './util.ts';

function needString(ctx: OpContext, x: { dtype: string }, what = 'input'): void {
  if (x.dtype !== 'string') ctx.fail(`${what} must be a string tensor, got ${x.dtype}`);
}

// ---- StringNormalizer ----

/** Drops combining marks after NFKD decomposition (non-ASCII strings only), as sklearn's strip_accents_unicode. */
function stripAccents(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the whole ASCII range, control characters included
  if (/^[\x00-\x7f]*$/.test(s)) return s;
  return s.normalize('NFKD').replace(/\p{M}/gu, '');
}

function removeStopwords(s: string, stops: Set<string>): string {
  return s
    .split(' ')
    .filter((w) => !stops.has(w))
    .join(' ');
}

function normalizerAttrs(ctx: OpContext): { action: string; sensitive: boolean; stopwords: string[] } {
  const action = ctx.string('case_change_action', 'NONE');
  if (action !== 'NONE' && action !== 'LOWER' && action !== 'UPPER')
    ctx.fail(`case_change_action '${action}' is not valid`);
  return { action, sensitive: ctx.int('is_case_sensitive', 0) !== 0, stopwords: ctx.strings('stopwords', []) };
}

const STRING_NORMALIZER: OpHandler = {
  op: 'StringNormalizer',
  since: 10,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    needString(ctx, x);
    normalizerAttrs(ctx);
    if (x.shape && x.shape.length !== 1 && !(x.shape.length === 2 && x.shape[0] === 1))
      ctx.fail('input must be [C] or [1, C]');
    return [
      {
        dtype: 'string',
        shape: x.shape ? x.shape.map((d, i) => (i === x.shape!.length - 1 ? unknownDim() : d)) : undefined,
      },
    ];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    needString(ctx, x);
    const { action, sensitive, stopwords } = normalizerAttrs(ctx);
    if (x.rank !== 1 && !(x.rank === 2 && x.dims[0] === 1))
      ctx.fail(`input must be [C] or [1, C], got dims [${x.dims}]`);
    const change = (s: string) => (action === 'LOWER' ? s.toLowerCase() : action === 'UPPER' ? s.toUpperCase() : s);
    const raw = new Set(stopwords);
    const changed = new Set(stopwords.map(change));
    const out = x.strings
      .map((s) => {
        let v = stripAccents(s);
        if (sensitive && raw.size > 0) v = removeStopwords(v, raw);
        v = change(v);
        if (!sensitive && changed.size > 0) v = removeStopwords(v, changed);
        return v;
      })
      .filter((s) => s.length > 0);
    if (out.length === 0) out.push('');
    return [Tensor.fromStrings(x.rank === 2 ? [1, out.length] : [out.length], out)];
  },
};

// ---- StringConcat ----

const STRING_CONCAT: OpHandler = {
  op: 'StringConcat',
  since: 20,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const y = need(ctx, inputs, 1);
    needString(ctx, x, 'X');
    needString(ctx, y, 'Y');
    return [{ dtype: 'string', shape: broadcastShapes(ctx, [x.shape, y.shape]) }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const y = need(ctx, inputs, 1);
    needString(ctx, x, 'X');
    needString(ctx, y, 'Y');
    let dims: number[];
    try {
      dims = broadcastDims(x.dims, y.dims);
    } catch {
      return ctx.fail(`dims [${x.dims}] and [${y.dims}] do not broadcast`);
    }
    const xi = broadcastIndex(x.dims, dims);
    const yi = broadcastIndex(y.dims, dims);
    const out = new Array<string>(sizeOf(dims));
    for (let i = 0; i < out.length; i++) out[i] = x.strings[xi ? xi[i]! : i]! + y.strings[yi ? yi[i]! : i]!;
    return [Tensor.fromStrings(dims, out)];
  },
};

// ---- StringSplit ----

/** Python's str.split(sep, maxsplit): sep undefined splits on whitespace runs and drops empty ends; maxsplit < 0 is unlimited. */
export function pySplit(s: string, sep: string | undefined, maxsplit: number): string[] {
  const out: string[] = [];
  if (sep === undefined) {
    let i = 0;
    const ws = (c: string) => /\s/u.test(c);
    while (true) {
      while (i < s.length && ws(s[i]!)) i++;
      if (i >= s.length) break;
      if (maxsplit >= 0 && out.length === maxsplit) {
        out.push(s.slice(i));
        break;
      }
      let j = i;
      while (j < s.length && !ws(s[j]!)) j++;
      out.push(s.slice(i, j));
      i = j;
    }
    return out;
  }
  let start = 0;
  while (maxsplit < 0 || out.length < maxsplit) {
    const k = s.indexOf(sep, start);
    if (k < 0) break;
    out.push(s.slice(start, k));
    start = k + sep.length;
  }
  out.push(s.slice(start));
  return out;
}

const STRING_SPLIT: OpHandler = {
  op: 'StringSplit',
  since: 20,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    needString(ctx, x);
    return [
      { dtype: 'string', shape: x.shape ? [...x.shape, unknownDim()] : undefined },
      { dtype: 'int64', shape: x.shape },
    ];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    needString(ctx, x);
    const delim = ctx.string('delimiter', '');
    const maxsplit = ctx.has('maxsplit') ? ctx.int('maxsplit') : -1;
    const parts = x.strings.map((s) => pySplit(s, delim === '' ? undefined : delim, maxsplit));
    const width = parts.reduce((m, p) => Math.max(m, p.length), 0);
    const out: string[] = [];
    for (const p of parts) for (let k = 0; k < width; k++) out.push(p[k] ?? '');
    return [
      Tensor.fromStrings([...x.dims, width], out),
      Tensor.fromNumbers(
        'int64',
        x.dims,
        parts.map((p) => p.length),
      ),
    ];
  },
};

// ---- RegexFullMatch ----

function compilePattern(ctx: OpContext): RegExp {
  const pattern = ctx.string('pattern');
  try {
    return new RegExp(`^(?:${pattern})$`, 'u');
  } catch (e) {
    return ctx.fail(`pattern '${pattern}' is not a valid regular expression: ${(e as Error).message}`);
  }
}

const REGEX_FULL_MATCH: OpHandler = {
  op: 'RegexFullMatch',
  since: 20,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    needString(ctx, x);
    compilePattern(ctx);
    return [{ dtype: 'bool', shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    needString(ctx, x);
    const re = compilePattern(ctx);
    return [
      Tensor.fromNumbers(
        'bool',
        x.dims,
        x.strings.map((s) => (re.test(s) ? 1 : 0)),
      ),
    ];
  },
};

// ---- TfIdfVectorizer ----

/** A trie node over n-gram items: id 0 = no n-gram ends here. */
interface Gram {
  id: number;
  next: Map<number | string, Gram>;
}

interface TfIdfModel {
  root: Gram;
  outSize: number;
  indexes: number[];
  weights: number[];
  mode: string;
  minN: number;
  maxN: number;
  skip: number;
}

function tfidfModel(ctx: OpContext): TfIdfModel {
  const mode = ctx.string('mode');
  if (mode !== 'TF' && mode !== 'IDF' && mode !== 'TFIDF') ctx.fail(`mode must be TF, IDF or TFIDF, got '${mode}'`);
  const minN = ctx.int('min_gram_length');
  const maxN = ctx.int('max_gram_length');
  const skip = ctx.int('max_skip_count');
  if (minN < 1 || maxN < minN || skip < 0) ctx.fail(`bad gram lengths [${minN}, ${maxN}] or skip ${skip}`);
  const counts = ctx.ints('ngram_counts');
  const indexes = ctx.ints('ngram_indexes');
  const pool: (number | string)[] = ctx.has('pool_int64s') ? ctx.ints('pool_int64s') : ctx.strings('pool_strings', []);
  const weights = ctx.floats('weights', []);
  const root: Gram = { id: 0, next: new Map() };
  let id = 1;
  for (let i = 0; i < counts.length; i++) {
    const size = i + 1;
    const start = counts[i]!;
    const end = i + 1 < counts.length ? counts[i + 1]! : pool.length;
    const n = Math.floor((end - start) / size);
    if (end - start <= 0) continue;
    if (size < minN || size > maxN) {
      id += n;
      continue;
    }
    for (let g = 0; g < n; g++) {
      let node = root;
      for (let k = 0; k < size; k++) {
        const key = pool[start + g * size + k]!;
        let child = node.next.get(key);
        if (!child) {
          child = { id: 0, next: new Map() };
          node.next.set(key, child);
        }
        node = child;
      }
      node.id = id++;
    }
  }
  if (indexes.length === 0) ctx.fail('ngram_indexes must not be empty');
  return { root, outSize: Math.max(...indexes) + 1, indexes, weights, mode, minN, maxN, skip };
}

/** Counts the n-grams of one row into freq (row offset applied by the caller). */
function countRow(m: TfIdfModel, row: ArrayLike<number | string>, freq: Float64Array, off: number): void {
  let startN = m.minN;
  for (let dist = 1; dist <= m.skip + 1; dist++) {
    for (let s = 0; s < row.length; s++) {
      if (s + dist * (startN - 1) >= row.length) break;
      let node = m.root;
      let item = s;
      for (let size = 1; size <= m.maxN && item < row.length && node.next.size > 0; size++, item += dist) {
        const child = node.next.get(row[item]!);
        if (!child) break;
        if (size >= startN && child.id !== 0) freq[off + m.indexes[child.id - 1]!]! += 1;
        node = child;
      }
    }
    if (startN === 1) {
      startN = 2; // unigrams are counted once, whatever the skip distance
      if (startN > m.maxN) break;
    }
  }
}

function tfidfWeights(m: TfIdfModel, freq: Float64Array): Float64Array {
  const out = new Float64Array(freq.length);
  const w = m.weights;
  for (let p = 0; p < freq.length; p++) {
    const f = freq[p]!;
    const i = p % m.outSize;
    if (m.mode === 'TF') out[p] = f;
    else if (m.mode === 'IDF') out[p] = f > 0 ? (w.length ? w[i]! : 1) : 0;
    else out[p] = w.length ? w[i]! * f : f;
  }
  return out;
}

const TFIDF_VECTORIZER: OpHandler = {
  op: 'TfIdfVectorizer',
  since: 9,
  infer(ctx, inputs) {
    const x: InferInput = need(ctx, inputs, 0);
    if (x.dtype !== 'string' && x.dtype !== 'int32' && x.dtype !== 'int64')
      ctx.fail(`input must be string, int32 or int64, got ${x.dtype}`);
    const m = tfidfModel(ctx);
    if (x.shape && x.shape.length > 2) ctx.fail(`input must be [C] or [B, C], got rank ${x.shape.length}`);
    const shape: Dim[] | undefined = x.shape
      ? x.shape.length === 2
        ? [x.shape[0]!, m.outSize]
        : [m.outSize]
      : undefined;
    return [{ dtype: 'float32', shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const m = tfidfModel(ctx);
    if (x.rank > 2) ctx.fail(`input must be [C] or [B, C], got dims [${x.dims}]`);
    const rows = x.rank === 2 ? x.dims[0]! : 1;
    const c = x.rank === 0 ? 1 : x.dims[x.rank - 1]!;
    const data: ArrayLike<number | string> = x.dtype === 'string' ? x.strings : x.nums;
    const freq = new Float64Array(rows * m.outSize);
    for (let r = 0; r < rows; r++) {
      const row = Array.prototype.slice.call(data, r * c, (r + 1) * c) as (number | string)[];
      countRow(m, row, freq, r * m.outSize);
    }
    return [Tensor.fromNumbers('float32', x.rank === 2 ? [rows, m.outSize] : [m.outSize], tfidfWeights(m, freq))];
  },
};

export const TEXT_OPS: OpHandler[] = [
  STRING_NORMALIZER,
  STRING_CONCAT,
  STRING_SPLIT,
  REGEX_FULL_MATCH,
  TFIDF_VECTORIZER,
];
