// Checks every offset, size, dtype, count and reference of a decoded plan header before anything reaches native code.
import { PlancError } from '../diagnostics.ts';
import type { HrtFacts } from '../ir.ts';
import { DTYPE_CODE, PLAN_DTYPE_BYTES } from '../kernel-enums.ts';
import { MAX_PLAN_BYTES } from '../limits.ts';
import { KERNELS, type KernelSpec } from '../kernel-schema.ts';
import { NAT_GRAPH, TOPK_IDS_OUTPUT, TOPK_LOGPROBS_OUTPUT } from './io-names.ts';
import { TENSOR_KIND, type PlanHeader, type PlanProgram } from './types.ts';

const MAX_RANK = 8;
const LIMIT = 1 << 24; // sanity cap on counts

export function validateHeader(h: PlanHeader, file: string): void {
  const bad = (msg: string): never => {
    throw new PlancError('PLANC_E401', `corrupt plan: ${msg}`, { file });
  };
  const count = (what: string, n: number) => {
    if (!Number.isSafeInteger(n) || n < 0 || n > LIMIT) bad(`${what} count ${n} is not sane`);
  };
  const uint = (what: string, n: number) => {
    if (!Number.isSafeInteger(n) || n < 0) bad(`${what} ${n} is not a valid size`);
  };
  if (!h.target || (h.target.kind !== 'cpu' && h.target.kind !== 'cuda')) bad(`unknown target '${h.target?.kind}'`);
  if (!h.profile) bad('no optimization profile');
  for (const [k, v] of Object.entries(h.profile.symbolMax)) uint(`profile bound of ${k}`, v);
  count('weight', h.weights.length);
  h.weights.forEach((w, i) => {
    const size = PLAN_DTYPE_BYTES[w.dtype];
    if (size === undefined) bad(`weight ${i} has unsupported dtype code ${w.dtype}`);
    if (w.dims.length > MAX_RANK) bad(`weight ${i} has rank ${w.dims.length}`);
    let n = 1;
    for (const d of w.dims) {
      uint(`weight ${i} dim`, d);
      n *= d;
    }
    uint(`weight ${i} offset`, w.offset);
    if (w.offset % 64 !== 0) bad(`weight ${i} offset ${w.offset} is not 64-byte aligned`);
    if (w.length !== n * size!) bad(`weight ${i} has ${w.length} bytes but dims [${w.dims}] need ${n * size!}`);
    if (w.offset + w.length > h.blobBytes)
      bad(`weight ${i} (${w.offset}+${w.length}) lies past the end of the weight data (${h.blobBytes})`);
  });
  validateTokenizer(h, bad);
  validateDecoding(h, bad, count);
  uint('arena size', h.arena?.bytes ?? -1);
  if (h.arena.bytes > MAX_PLAN_BYTES)
    bad(`arena of ${h.arena.bytes} bytes is more than a plan can address (${MAX_PLAN_BYTES})`);
  count('program', h.programs.length);
  const names = new Set<string>();
  for (const p of h.programs) {
    if (names.has(p.graph)) bad(`two programs for graph '${p.graph}'`);
    names.add(p.graph);
    validateProgram(p, h, bad, count, uint);
  }
  validateCuda(h, bad, count);
  validateVocab(h, bad);
  validateTranslationOutputs(h, bad);
}

/** Float arguments that may be infinite: a fill value (-inf masks) and the free-form list of the test kernel. */
const INFINITE_OK = new Set(['value', 'floats']);

/**
 * A kernel's float arguments are numbers, none NaN, and finite unless infinity means something there (a fill value):
 * a NaN or infinite attention scale, epsilon or slope would make every output NaN without an error.
 */
function validateFargs(p: PlanProgram, bad: (m: string) => never): void {
  p.kernels.forEach((k, i) => {
    const spec = (KERNELS as Record<string, KernelSpec>)[k.name];
    const list = spec?.fargs ?? [];
    k.fargs.forEach((f, j) => {
      const arg = list[Math.min(j, list.length - 1)];
      const name = arg && (j < list.length || arg.variadic) ? arg.name : `#${j}`;
      if (typeof f !== 'number' || Number.isNaN(f) || (!Number.isFinite(f) && !INFINITE_OK.has(name))) {
        bad(
          `program '${p.graph}' kernel ${i} (${k.name}) has float argument ${name} = ${f}; it must be a finite number`,
        );
      }
    });
  });
}

/**
 * The outputs translation reads (runtime/decode): a seq2seq plan (encoder + decoder_with_past) has the encoder's
 * float last_hidden_state [batch, length, width] and, from each decoder graph, float logits [batch, tokens, vocab] or a
 * top-k plan's topk_logprobs (float) and topk_ids (int64) of the same [batch, tokens, k]. A plan missing one, or whose
 * output points at a tensor of another dtype, rank or vocabulary width, is refused here instead of failing every line;
 * so is a first decoder step without the present.X output that fills each cache decoder_with_past reads.
 */
function validateTranslationOutputs(h: PlanHeader, bad: (m: string) => never): void {
  const program = (g: string) => h.programs.find((p) => p.graph === g);
  const enc = program('encoder');
  if (!enc || !program('decoder_with_past')) return;
  const FLOATS: number[] = [DTYPE_CODE.float32, DTYPE_CODE.float16, DTYPE_CODE.bfloat16];
  /** The output's tensor, checked for dtype and rank 3. */
  const output = (p: PlanProgram, name: string, dtypes: number[], what: string) => {
    const io = p.outputs.find((o) => o.name === name);
    if (!io) return undefined;
    const t = p.tensors[io.tensor]!;
    if (!dtypes.includes(t.dtype) || t.dims.length !== 3)
      bad(
        `program '${p.graph}' output '${name}' points at tensor ${io.tensor} ('${t.name}'), which is not ${what} (dtype code ${t.dtype}, rank ${t.dims.length})`,
      );
    return t;
  };
  /** The value of a constant expression (undefined when it involves symbols). */
  const constant = (p: PlanProgram, e: number): number | undefined => {
    const x = p.exprs[e];
    if (!x) return undefined;
    if (x.terms.some((t) => t.factors.length > 0)) return undefined;
    return x.terms.reduce((a, t) => a + t.coeff, 0);
  };
  const names = (p: PlanProgram) => p.outputs.map((o) => o.name).join(', ') || 'none';
  if (!output(enc, 'last_hidden_state', FLOATS, 'a float [batch, length, width] tensor'))
    bad(`program 'encoder' has no output 'last_hidden_state', which translation reads (its outputs: ${names(enc)})`);
  // an HRT plan's Skip-CMLM graph gives next-token scores per position as the decoders do
  for (const g of ['decoder', 'decoder_with_past', ...(h.decoding.hrt ? [NAT_GRAPH] : [])]) {
    const p = program(g);
    if (!p) bad(`a seq2seq plan without a '${g}' program`);
    const seen = new Set<string>();
    for (const o of p!.outputs) {
      if (seen.has(o.name)) bad(`program '${g}' has two outputs named '${o.name}'`);
      seen.add(o.name);
    }
    const logits = output(p!, 'logits', FLOATS, 'a float [batch, tokens, vocab] tensor');
    const ids = output(p!, TOPK_IDS_OUTPUT, [DTYPE_CODE.int64], 'an int64 [batch, tokens, k] tensor');
    const lp = output(p!, TOPK_LOGPROBS_OUTPUT, [DTYPE_CODE.float32], 'a float32 [batch, tokens, k] tensor');
    if (!logits && !(ids && lp))
      bad(
        `program '${g}' has no output 'logits' (or '${TOPK_LOGPROBS_OUTPUT}' and '${TOPK_IDS_OUTPUT}'), which translation reads (its outputs: ${names(p!)})`,
      );
    const vocab = h.decoding.vocabSize;
    const width = logits && constant(p!, logits.dims[2]!);
    if (logits && vocab !== undefined && width !== undefined && width !== vocab)
      bad(
        `program '${g}' output 'logits' points at tensor '${logits.name}' of width ${width}, not the vocabulary (${vocab})`,
      );
    if (ids && lp && ids.dims.join() !== lp.dims.join())
      bad(`program '${g}' outputs '${TOPK_IDS_OUTPUT}' and '${TOPK_LOGPROBS_OUTPUT}' differ in shape`);
  }
  // every cache a decoder step reads (kv_cache.X in place, or past_key_values.X) is filled from the first step's present.X
  const first = program('decoder')!;
  for (const i of program('decoder_with_past')!.inputs) {
    const m = /^(?:kv_cache|past_key_values)\.(.+)$/.exec(i.name);
    if (!m) continue;
    const present = `present.${m[1]}`;
    const io = first.outputs.find((o) => o.name === present);
    if (!io)
      bad(
        `program 'decoder' has no output '${present}', which fills the cache '${i.name}' that 'decoder_with_past' reads (its outputs: ${names(first)})`,
      );
    const t = first.tensors[io!.tensor]!;
    if (!FLOATS.includes(t.dtype) || t.dims.length !== 4)
      bad(
        `program 'decoder' output '${present}' points at tensor ${io!.tensor} ('${t.name}'), which is not a float [batch, heads, length, head size] tensor (dtype code ${t.dtype}, rank ${t.dims.length})`,
      );
  }
}

/** A vocab rewrite names its method; a shortlist's CSR is monotone and its ids lie in the vocabulary. */
function validateVocab(h: PlanHeader, bad: (m: string) => never): void {
  const v = h.vocab;
  if (!v) return;
  if (v.method !== 'shortlist' && v.method !== 'clusters') bad(`unknown vocab method '${v.method}'`);
  const vocab = h.decoding.vocabSize ?? Infinity;
  const inVocab = (what: string, ids: number[]) =>
    ids.forEach((t) => {
      if (!(Number.isInteger(t) && t >= 0 && t < vocab)) bad(`vocab ${what} id ${t} outside [0, ${vocab})`);
    });
  inVocab('special', v.specialIds);
  if (v.method !== 'shortlist') return;
  if (v.offsets.length < 1 || v.offsets[0] !== 0 || v.offsets[v.offsets.length - 1] !== v.targets.length)
    bad('vocab shortlist offsets do not span its targets');
  for (let i = 1; i < v.offsets.length; i++)
    if (!(v.offsets[i]! >= v.offsets[i - 1]!)) bad(`vocab shortlist offsets decrease at ${i}`);
  if (v.probs.length !== 0 && v.probs.length !== v.targets.length)
    bad('vocab shortlist probs and targets differ in length');
  inVocab('shortlist target', v.targets);
  inVocab('frequent', v.frequent);
}

/** A cuda plan carries its compiled kernels and one launch per kernel call; a cpu plan carries none. */
function validateCuda(h: PlanHeader, bad: (m: string) => never, count: (w: string, n: number) => void): void {
  const c = h.cuda;
  if (h.target.kind !== 'cuda') {
    if (c) bad(`a ${h.target.kind} plan carries CUDA code`);
    return;
  }
  if (!c || c.fatbin.length === 0) bad('a cuda plan without compiled kernels (no fatbin)');
  if (h.target.archs.length === 0 || h.target.archs.some((a) => !/^sm_\d+a?$/.test(a)))
    bad(`bad CUDA arch list [${h.target.archs}]`);
  if (!Number.isSafeInteger(c!.scratchBytes) || c!.scratchBytes < 0 || c!.scratchBytes > 2 ** 40)
    bad(`CUDA scratch of ${c!.scratchBytes} bytes is not sane`);
  count('CUDA kernel stats', c!.kernels.length);
  if (c!.programs.length !== h.programs.length)
    bad(`CUDA code has launches for ${c!.programs.length} programs, the plan has ${h.programs.length}`);
  h.programs.forEach((p, pi) => {
    const calls = c!.programs[pi]!.calls;
    if (calls.length !== p.kernels.length)
      bad(`program '${p.graph}' has ${p.kernels.length} kernels but ${calls.length} CUDA launches`);
    calls.forEach((call, k) => {
      const what = `program '${p.graph}' kernel ${k} (${p.kernels[k]!.name})`;
      const kern = p.kernels[k]!;
      const operands = [...kern.inputs, ...kern.outputs];
      if (call.variants.length === 0 || call.variants.length > 4)
        bad(`${what} has ${call.variants.length} CUDA launch variants`);
      for (const v of call.variants) {
        if (!/^[A-Za-z_]\w{0,127}$/.test(v.entry)) bad(`${what} has a bad CUDA entry name`);
        if (!Number.isInteger(v.block) || v.block < 1 || v.block > 1024) bad(`${what} has block size ${v.block}`);
        if (v.grid.length > 3) bad(`${what} has a ${v.grid.length}-D grid`);
        for (const g of v.grid) {
          const t = operands[g.operand];
          if (t === undefined || t < 0) bad(`${what} sizes its grid by operand ${g.operand}, which it does not have`);
          const rank = p.tensors[t!]!.dims.length;
          if (!(g.from <= g.to && g.to <= rank) || !(g.div >= 1) || !(g.mul >= 1)) bad(`${what} has a bad grid rule`);
        }
      }
    });
  });
}

/** The tokenizer kind is '', 'spm' or 'hf', and the bytes are empty exactly when the kind is ''. */
/** Token ids of the decoding conventions lie in the vocabulary; lengths and beams are positive; lists are sane. */
function validateDecoding(h: PlanHeader, bad: (m: string) => never, count: (w: string, n: number) => void): void {
  const d = h.decoding;
  if (!d) bad('no decoding section');
  const vocab = d.vocabSize ?? Infinity;
  const token = (what: string, t: number | undefined) => {
    if (t !== undefined && !(Number.isSafeInteger(t) && t >= 0 && t < vocab))
      bad(`decoding ${what} ${t} outside [0, ${vocab})`);
  };
  const tokens = (what: string, ids: number[] | undefined) => {
    count(`decoding ${what}`, ids?.length ?? 0);
    ids?.forEach((t) => token(what, t));
  };
  for (const k of ['decoderStartId', 'eosId', 'padId', 'unkId', 'bosId', 'forcedBosId', 'forcedEosId'] as const)
    token(k, d[k]);
  for (const k of ['eosIds', 'suppressTokens', 'beginSuppressTokens'] as const) tokens(k, d[k]);
  count('decoding badWords', d.badWords?.length ?? 0);
  d.badWords?.forEach((w, i) => {
    if (!w.ids?.length) bad(`decoding badWords ${i} is empty`);
    tokens('badWords', w.ids);
  });
  for (const k of ['vocabSize', 'maxLength', 'maxNewTokens', 'numBeams', 'stepTokens', 'numReturnSequences'] as const) {
    const v = d[k];
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= 1)) bad(`decoding ${k} ${v} is not a positive integer`);
  }
  for (const k of ['minLength', 'minNewTokens', 'noRepeatNgramSize', 'encoderNoRepeatNgramSize', 'topK'] as const) {
    const v = d[k];
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= 0)) bad(`decoding ${k} ${v} is not an integer ≥ 0`);
  }
  if (d.earlyStopping !== undefined && !['true', 'false', 'never'].includes(d.earlyStopping))
    bad(`decoding earlyStopping '${String(d.earlyStopping)}' is not true, false or never`);
  if (d.lengthPenalty !== undefined && !Number.isFinite(d.lengthPenalty))
    bad(`decoding lengthPenalty ${d.lengthPenalty} is not a finite number`);
  if (d.repetitionPenalty !== undefined && !(d.repetitionPenalty > 0 && Number.isFinite(d.repetitionPenalty)))
    bad(`decoding repetitionPenalty ${d.repetitionPenalty} is not a number > 0`);
  if (d.doSample !== undefined && typeof d.doSample !== 'boolean')
    bad(`decoding doSample ${String(d.doSample)} is not true or false`);
  if (d.temperature !== undefined && !(d.temperature >= 0 && Number.isFinite(d.temperature)))
    bad(`decoding temperature ${d.temperature} is not a number ≥ 0`);
  if (d.topP !== undefined && !(d.topP >= 0 && d.topP <= 1)) bad(`decoding topP ${d.topP} is not a number in [0, 1]`);
  if (d.hrt) validateHrt(d.hrt, bad, count);
}

/** An HRT record: chunk sizes 1 first then ascending, one start id each, ids within the embedding rows. */
function validateHrt(r: HrtFacts, bad: (m: string) => never, count: (w: string, n: number) => void): void {
  count('decoding hrt chunkSizes', r.chunkSizes.length);
  const rows = r.inputVocabSize;
  if (!(Number.isSafeInteger(rows) && rows >= 1)) bad(`decoding hrt inputVocabSize ${rows} is not a positive integer`);
  if (
    r.chunkSizes[0] !== 1 ||
    r.chunkSizes.some((k, i) => !Number.isSafeInteger(k) || (i > 0 && k <= r.chunkSizes[i - 1]!))
  )
    bad(`decoding hrt chunkSizes [${r.chunkSizes.join(', ')}] are not 1 then ascending integers`);
  if (r.bosIds.length !== r.chunkSizes.length)
    bad(`decoding hrt has ${r.bosIds.length} start ids for ${r.chunkSizes.length} chunk sizes`);
  for (const [what, t] of [...r.bosIds.map((b, i) => [`bosIds[${i}]`, b] as const), ['maskId', r.maskId] as const]) {
    if (!(Number.isSafeInteger(t) && t >= 0 && t < rows)) bad(`decoding hrt ${what} ${t} outside [0, ${rows})`);
  }
  if (!(Number.isSafeInteger(r.maxPositions) && r.maxPositions >= 0))
    bad(`decoding hrt maxPositions ${r.maxPositions} is not an integer ≥ 0`);
}

function validateTokenizer(h: PlanHeader, bad: (m: string) => never): void {
  const kind = h.tokenizerKind ?? '';
  const bytes = h.tokenizer?.length ?? 0;
  if (kind !== '' && kind !== 'spm' && kind !== 'hf') bad(`unknown tokenizer kind '${kind}'`);
  if (kind === '' && bytes > 0) bad(`tokenizer has ${bytes} bytes but no kind`);
  if (kind !== '' && bytes === 0) bad(`tokenizer kind '${kind}' but no tokenizer bytes`);
}

function validateProgram(
  p: PlanProgram,
  h: PlanHeader,
  bad: (m: string) => never,
  count: (w: string, n: number) => void,
  uint: (w: string, n: number) => void,
): void {
  const g = `program '${p.graph}'`;
  count(`${g} symbol`, p.symbols.length);
  count(`${g} expression`, p.exprs.length);
  count(`${g} tensor`, p.tensors.length);
  count(`${g} kernel`, p.kernels.length);
  uint(`${g} arena size`, p.arenaBytes);
  if (p.arenaBytes > h.arena.bytes)
    bad(`${g} needs ${p.arenaBytes} arena bytes but the plan's arena has ${h.arena.bytes}`);
  for (const [op, n] of Object.entries(p.fusedOps ?? {}))
    if (!/^planc\.\w+$/.test(op) || !Number.isSafeInteger(n)) bad(`${g} has a bad fused-op count ${op}=${n}`);
  p.symbols.forEach((s, i) => {
    if (s.input >= p.inputs.length) bad(`${g} symbol ${i} reads input ${s.input} of ${p.inputs.length}`);
    if (s.axis >= MAX_RANK) bad(`${g} symbol ${i} reads axis ${s.axis}`);
    if (s.fromValue && p.tensors[p.inputs[s.input]?.tensor ?? -1]?.dtype !== DTYPE_CODE.int64)
      bad(`${g} symbol ${i} reads the value of a non-int64 input`);
  });
  p.exprs.forEach((e, i) => {
    if (e.terms.length > 64) bad(`${g} expression ${i} has ${e.terms.length} terms`);
    for (const t of e.terms) {
      if (!Number.isSafeInteger(t.coeff)) bad(`${g} expression ${i} has coefficient ${t.coeff}`);
      if (t.factors.length > 8) bad(`${g} expression ${i} has a term of ${t.factors.length} factors`);
      for (const f of t.factors)
        if (f >= p.symbols.length) bad(`${g} expression ${i} uses symbol ${f} of ${p.symbols.length}`);
    }
  });
  p.tensors.forEach((t, i) => {
    const what = `${g} tensor ${i} ('${t.name}')`;
    if (PLAN_DTYPE_BYTES[t.dtype] === undefined) bad(`${what} has unsupported dtype code ${t.dtype}`);
    if (t.dims.length > MAX_RANK) bad(`${what} has rank ${t.dims.length}`);
    for (const d of t.dims) if (d >= p.exprs.length) bad(`${what} uses expression ${d} of ${p.exprs.length}`);
    switch (t.kind) {
      case TENSOR_KIND.ARENA:
        uint(`${what} offset`, t.offset);
        uint(`${what} slot`, t.slotBytes);
        if (t.offset + t.slotBytes > p.arenaBytes)
          bad(`${what} slot ${t.offset}+${t.slotBytes} is past the program's arena (${p.arenaBytes})`);
        break;
      case TENSOR_KIND.WEIGHT:
        if (t.ref >= h.weights.length) bad(`${what} refers to weight ${t.ref} of ${h.weights.length}`);
        break;
      case TENSOR_KIND.INPUT:
      case TENSOR_KIND.STATE:
        if (t.ref >= p.inputs.length) bad(`${what} refers to input ${t.ref} of ${p.inputs.length}`);
        break;
      case TENSOR_KIND.ALIAS:
        if (t.ref >= i) bad(`${what} aliases tensor ${t.ref}, which does not come before it`);
        break;
      default:
        bad(`${what} has unknown kind ${t.kind}`);
    }
  });
  const tensor = (what: string, k: number) => {
    if (!Number.isInteger(k) || k < 0 || k >= p.tensors.length)
      bad(`${what} refers to tensor ${k} of ${p.tensors.length}`);
  };
  p.kernels.forEach((k, i) => {
    const what = `${g} kernel ${i} (${k.name})`;
    if (!/^[a-z_0-9]+$/.test(k.name)) bad(`${what} has a bad name`);
    // A variant names one of the CPU kernel's (compiler/kernel-schema.ts; an unknown one is PLANC_E403 at load).
    const variant = k.variant ?? '';
    if (variant !== '' && !/^[a-z][a-z0-9_]{0,63}$/.test(variant)) bad(`${what} has a bad variant name`);
    if (variant !== '' && h.target.kind !== 'cpu')
      bad(`${what} names CPU variant '${variant}' in a ${h.target.kind} plan`);
    for (const x of k.inputs) if (x !== -1) tensor(what, x);
    for (const x of k.outputs) {
      tensor(what, x);
      let root = x;
      for (let hops = 0; p.tensors[root]!.kind === TENSOR_KIND.ALIAS && hops < p.tensors.length; hops++)
        root = p.tensors[root]!.ref;
      const kind = p.tensors[root]!.kind;
      if (kind !== TENSOR_KIND.ARENA && kind !== TENSOR_KIND.STATE) bad(`${what} writes into a read-only tensor ${x}`);
    }
    for (const a of k.iargs) if (a >= p.exprs.length) bad(`${what} uses expression ${a} of ${p.exprs.length}`);
    if (k.inputs.length > 64 || k.outputs.length > 64 || k.iargs.length > 256 || k.fargs.length > 64)
      bad(`${what} has too many arguments`);
  });
  p.inputs.forEach((io, i) => {
    tensor(`${g} input ${i}`, io.tensor);
    const t = p.tensors[io.tensor]!;
    if ((t.kind !== TENSOR_KIND.INPUT && t.kind !== TENSOR_KIND.STATE) || t.ref !== i)
      bad(`${g} input ${i} ('${io.name}') is not an input tensor`);
  });
  if (p.outputs.length === 0) bad(`${g} has no outputs`);
  p.outputs.forEach((io, i) => tensor(`${g} output ${i}`, io.tensor));
  validateFargs(p, bad);
}
