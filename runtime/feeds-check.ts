// Checks of feed values made before a run: tensors from plain numbers (integers where the dtype is), and no empty feeds.
import { PlancError, type Where } from '../compiler/diagnostics.ts';
import { tensorFrom, type RtDType, type RtTensor } from './tensor.ts';

const DTYPES: RtDType[] = ['float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32', 'int8', 'uint8', 'bool'];

/** The values an integer dtype holds (int64: the integers a double represents exactly). */
const INT_RANGE: Partial<Record<RtDType, [number, number]>> = {
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  int32: [-(2 ** 31), 2 ** 31 - 1],
  int8: [-128, 127],
  uint8: [0, 255],
  bool: [0, 1],
};

/**
 * A feed tensor from plain numbers (JSON feeds), checked: dims are integers ≥ 0, there are as many values as the dims
 * say, and an integer or bool feed holds integers in its dtype's range (5.5 in an int64 feed is an error, not 5).
 */
export function feedTensor(
  name: string,
  dtype: RtDType,
  dims: unknown,
  values: ArrayLike<unknown>,
  where: Where = {},
): RtTensor {
  const bad = (msg: string): never => {
    throw new PlancError('PLANC_E405', `feed '${name}' ${msg}`, where);
  };
  if (!DTYPES.includes(dtype)) bad(`has dtype ${JSON.stringify(dtype)}; planc feeds are ${DTYPES.join(', ')}`);
  if (!Array.isArray(dims) || dims.some((d) => typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0))
    bad(`has dims ${JSON.stringify(dims)}; they must be integers ≥ 0`);
  const n = (dims as number[]).reduce((a, b) => a * b, 1);
  if (values.length !== n) bad(`has ${values.length} values for dims [${dims as number[]}], which hold ${n}`);
  const nums = new Array<number>(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    const x = typeof v === 'boolean' ? Number(v) : v;
    if (typeof x !== 'number') bad(`holds ${JSON.stringify(v) ?? String(v)} at ${i}; it must hold numbers`);
    nums[i] = x as number;
  }
  const range = INT_RANGE[dtype];
  if (range) {
    const i = nums.findIndex((x) => !Number.isInteger(x) || x < range[0] || x > range[1]);
    if (i >= 0) bad(`is ${dtype} but holds ${nums[i]} at ${i}; it must hold integers in [${range[0]}, ${range[1]}]`);
  }
  return tensorFrom(dtype, dims as number[], nums);
}

/**
 * A feed with a zero dim where the plan's dim is not a declared 0 is refused at the feed (a sentence of no tokens, a
 * batch of no rows: kernels would fail on it, far from the cause). `declared` gives the plan's dims as text ('0' for a
 * literal zero: ONNX models may take empty tensors by design, e.g. CastLike's shape-only input), written out only when
 * needed.
 */
export function checkNotEmpty(
  name: string,
  dims: number[],
  declared: () => string[],
  bad: (msg: string) => never,
): void {
  if (!dims.includes(0)) return;
  const d = declared(); // only written out for an empty feed: every run checks its feeds
  if (dims.some((x, i) => x === 0 && d[i] !== '0'))
    bad(`feed '${name}' is empty (dims [${dims}]): the plan's dims [${d}] must be at least 1`);
}

/** Feeds whose values are token ids: they must lie in the vocabulary (the embedding gather checks again natively). */
export const TOKEN_ID_FEED = /input_ids/;
/** Feeds whose values are attention masks: each value is 0 (padding) or 1 (a token); 2 or -1 give NaN outputs. */
export const MASK_FEED = /attention_mask$/;

/**
 * The values of id and mask feeds (host data only; a resident feed is not read): token ids in [0, vocab) when the
 * plan records its vocabulary, attention-mask values 0 or 1. Fails through `bad` naming the feed, value and position.
 */
export function checkFeedValues(
  name: string,
  data: ArrayLike<number | bigint>,
  vocab: number | undefined,
  bad: (msg: string) => never,
): void {
  if (TOKEN_ID_FEED.test(name) && vocab) {
    for (let i = 0; i < data.length; i++) {
      const v = Number(data[i]);
      if (!(v >= 0 && v < vocab))
        bad(`feed '${name}' holds token id ${v} at ${i}, outside the vocabulary [0, ${vocab})`);
    }
  } else if (MASK_FEED.test(name)) {
    for (let i = 0; i < data.length; i++) {
      const v = Number(data[i]);
      if (v !== 0 && v !== 1)
        bad(`feed '${name}' holds ${v} at ${i}; an attention mask holds 0 (padding) or 1 (a token)`);
    }
  }
}
