// `planc optimize MODEL -o PLAN`: parses the options, imports the model, compiles it (optimize/compile.ts), writes and reports the plan.
import * as path from 'node:path';
import { PlancError } from '../compiler/diagnostics.ts';
import { importModel } from '../model/onnx/import-model.ts';
import { readPositionLimits } from '../model/onnx/position-limits.ts';
import { writePlanFile } from '../compiler/plan/format.ts';
import { parseVocabSpec } from '../compiler/vocab/spec.ts';
import type { SpecialIds } from '../codegen/build-plan.ts';
import { DEFAULT_ARCHS, findNvcc, parseArchs } from '../codegen/cuda/nvcc.ts';
import { DEFAULT_PROFILE, MAX_DIM } from '../codegen/profile.ts';
import { checkDumpAfter, compile } from '../optimize/compile.ts';
import { parseArgs, usageLine, type CommandSpec } from './args.ts';
import { checkOutputFile } from './files.ts';
import { Progress } from './progress.ts';
import { applyThreads, THREADS_OPTION } from './threads.ts';
import { findTokenizer, type TokenizerFile } from './tokenizer-file.ts';
import { formatQuantizationReport, parseQuantize } from './quantize.ts';
import { formatVocabReport } from './vocab.ts';
import { formatFastReport } from './fast.ts';
import { formatTuneReport, TUNE_OPTIONS, tuneRequest } from './tune-options.ts';

export const OPTIMIZE: CommandSpec = {
  name: 'optimize',
  args: 'MODEL',
  summary:
    'Compiles a model into a plan file: imports and verifies MODEL (a .onnx file, or a Hugging Face seq2seq folder with encoder_model.onnx and its decoders, config.json, generation_config.json and a tokenizer), fuses and lowers every graph to native kernel calls, plans their memory, and writes the plan with its weights and tokenizer. Prints a summary (steps with their times on standard error).',
  options: {
    output: {
      kind: 'string',
      short: 'o',
      value: 'PLAN',
      help: 'the plan file to write (required); its folder must exist',
    },
    target: {
      kind: 'string',
      value: 'cpu|cuda',
      help: 'where the plan runs (default cpu); cuda compiles the kernels with nvcc',
    },
    arch: {
      kind: 'string',
      value: 'LIST',
      help: `GPU architectures of a cuda plan, sm_80 or newer (default ${DEFAULT_ARCHS.join(',')})`,
    },
    'max-batch': {
      kind: 'number',
      value: 'N',
      help: `the most sentences (times beams) per run; sizes the arena (default ${DEFAULT_PROFILE.maxBatch})`,
    },
    'max-src-len': {
      kind: 'number',
      value: 'N',
      help: `the most source tokens (default ${DEFAULT_PROFILE.maxSrcLen}, lowered to the model's position table)`,
    },
    'max-tgt-len': {
      kind: 'number',
      value: 'N',
      help: `the most target tokens (default ${DEFAULT_PROFILE.maxTgtLen}, lowered to the model's position table)`,
    },
    'max-dim': {
      kind: 'string',
      value: 'NAME=N,...',
      help: 'bounds of other symbolic dims, e.g. decoder_sequence_length=8',
    },
    tokenizer: {
      kind: 'string',
      value: 'FILE',
      help: 'the tokenizer to embed (a SentencePiece .spm/.model or a tokenizer.json); default: the one in the model folder',
    },
    'no-tokenizer': {
      kind: 'boolean',
      help: 'embed no tokenizer (translate then takes token ids: planc translate --ids)',
    },
    'decoder-start-id': {
      kind: 'number',
      value: 'N',
      help: "the decoder's start token id (default: config.json's decoder_start_token_id)",
    },
    'eos-id': { kind: 'number', value: 'N', help: "the end-of-sentence id (default: config.json's eos_token_id)" },
    'pad-id': { kind: 'number', value: 'N', help: "the padding id (default: config.json's pad_token_id)" },
    'unk-id': { kind: 'number', value: 'N', help: "the unknown-token id (default: config.json's or the tokenizer's)" },
    'no-fuse': { kind: 'boolean', help: 'skip the fusion passes (plain kernels; for comparisons)' },
    'step-tokens': {
      kind: 'number',
      value: 'N',
      help: 'decoder steps take 1..N new tokens per row (the lookup and parallel Jacobi strategies verify drafts in one step); default 8 on cpu (1 where the export fixes the step at one token: --explain says why), 1 on cuda',
    },
    topk: {
      kind: 'number',
      value: 'N',
      help: "the decoder step returns each row's N best tokens instead of logits (default for translation models: enough for exact beams up to max(4, num_beams) besides banned ids, 8 without any); 0 keeps the logits",
    },
    vocab: {
      kind: 'string',
      value: 'SPEC',
      help: 'vocabulary rewrite of the output projection: shortlist=FILE[,first=N,best=N] (a Marian or CTranslate2 lexical shortlist), clusters=R,K (with --calibrate), or auto[=R:R:...,K:K:...] (with --calibrate and --eval-src: every R × K point measured, the cheapest that holds the accuracy gate kept)',
    },
    calibrate: {
      kind: 'string',
      value: 'FILE',
      help: "source sentences, one per line, that --vocab clusters=R,K and auto (and --fast's clusters) are calibrated on; never the --eval-src text",
    },
    quantize: {
      kind: 'string',
      value: 'MODE',
      help: 'quantize the products over constant weights: int8 (weights per output channel, inputs per row at run time), w8 (int8 weights, float32 inputs), int16 (11-12 bit weights and inputs, scales read from the data), fp16 / bf16 (float16 / bfloat16 weights, inputs rounded to them, float32 sums: cuda tensor cores; on cpu a slow reference), or auto (int8, with the layers whose measured error breaks the accuracy gate kept in higher precision; needs --eval-src)',
    },
    'quantize-layers': {
      kind: 'string',
      value: 'NODE=P,...',
      help: 'per-layer precision (int8, w8, int16, fp16, bf16, float32) by IR node name, over --quantize (see planc inspect --json for the names)',
    },
    'eval-src': {
      kind: 'string',
      value: 'FILE',
      help: "held-out source sentences on which --vocab's, --quantize's and --fast's quality is measured (top-1 agreement, identical sentences vs the unrewritten / float32 plan)",
    },
    'eval-ref': {
      kind: 'string',
      value: 'FILE',
      help: 'references of --eval-src, to report BLEU with and without the rewrite or quantization',
    },
    fast: {
      kind: 'boolean',
      help: 'the fastest plan that keeps the translation: quantization rungs (float32, int8, int8 with w8 where a layer needs it, w8, int16, int16 with a float32 output layer) × vocabulary points (the full projection, and the clusters grid of --vocab auto when --calibrate is given, a --vocab shortlist=FILE when given) built and measured together against the float32 plan on --eval-src (needs it; --eval-ref adds BLEU to the gate), timed here at --max-batch; the fastest that holds the gate (identical >= 97%, BLEU within 0.3) is kept, every measured point recorded in the plan; excludes --quantize and --vocab clusters/auto',
    },
    'dump-after': {
      kind: 'string',
      value: 'PASS|all',
      help: 'print the IR after a pass (or the programs after a program pass) on standard error',
    },
    explain: { kind: 'boolean', help: 'say on standard error why a fusion rule declined a partial match' },
    'emit-ts': {
      kind: 'string',
      value: 'FILE',
      help: "also write a typed TypeScript module for the plan: its graphs' feeds and outputs (dtypes, symbolic dims) and typed run/translate wrappers over the planc package",
    },
    tune: {
      kind: 'boolean',
      help: "tune the plan on this machine (as planc tune): each kernel call's variants measured in the plan, the fastest kept where it beats the default, every decision recorded; uses the tuning cache",
    },
    ...TUNE_OPTIONS,
    quiet: { kind: 'boolean', help: 'print nothing but errors' },
    threads: THREADS_OPTION,
  },
};

const mb = (b: number) => `${(b / 1e6).toFixed(1)} MB`;

function positiveInt(flag: string, v: unknown, def: number): number {
  if (v === undefined) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_DIM)
    throw new PlancError('PLANC_E301', `--${flag} must be an integer in [1, ${MAX_DIM}], got ${v}`);
  return v;
}

/**
 * A length bound of the profile: the flag's value, refused beyond the model's position table; by default the
 * default bound, lowered to the table's size when that is smaller.
 */
function lengthLimit(
  flag: string,
  v: unknown,
  def: number,
  table: number | undefined,
  from: string | undefined,
): number {
  if (v === undefined) return table === undefined ? def : Math.min(def, table);
  const n = positiveInt(flag, v, def);
  if (table !== undefined && n > table) {
    throw new PlancError(
      'PLANC_E301',
      `--${flag} ${n} is beyond the model's position table: it covers ${table} positions (${from})`,
    );
  }
  return n;
}

function parseMaxDims(s: string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of (s ?? '').split(',').filter((x) => x)) {
    const m = /^([\w.:-]+)=(\d+)$/.exec(part.trim());
    if (!m) throw new PlancError('PLANC_E301', `--max-dim wants NAME=N[,NAME=N...], got '${part}'`);
    const n = Number(m[2]);
    if (n < 1 || n > MAX_DIM)
      throw new PlancError('PLANC_E301', `--max-dim ${m[1]}=${m[2]}: a bound must be an integer in [1, ${MAX_DIM}]`);
    out[m[1]!] = n;
  }
  return out;
}

function tokenId(flag: string, v: unknown): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
    throw new PlancError('PLANC_E301', `--${flag} must be a token id (an integer ≥ 0), got ${v}`);
  return v;
}

function specialIds(flags: Record<string, unknown>): SpecialIds {
  return {
    decoderStartId: tokenId('decoder-start-id', flags['decoder-start-id']),
    eosId: tokenId('eos-id', flags['eos-id']),
    padId: tokenId('pad-id', flags['pad-id']),
    unkId: tokenId('unk-id', flags['unk-id']),
  };
}

function chooseTokenizer(model: string, flags: Record<string, unknown>): TokenizerFile | undefined {
  if (flags['no-tokenizer'] === true) {
    if (flags.tokenizer !== undefined)
      throw new PlancError('PLANC_E301', '--tokenizer and --no-tokenizer exclude each other');
    return undefined;
  }
  return findTokenizer(model, flags.tokenizer as string | undefined);
}

export async function runOptimize(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(OPTIMIZE, argv);
  const model = positional[0]!;
  const out = flags.output as string | undefined;
  if (!out)
    throw new PlancError(
      'PLANC_E301',
      `optimize needs -o PLAN (the plan file to write)\nusage: ${usageLine(OPTIMIZE)}`,
    );
  checkOutputFile(out, '-o');
  if (flags['emit-ts'] !== undefined) checkOutputFile(String(flags['emit-ts']), '--emit-ts');
  applyThreads(flags);
  const target = (flags.target as string | undefined) ?? 'cpu';
  if (target !== 'cpu' && target !== 'cuda')
    throw new PlancError('PLANC_E301', `--target ${target}: planc builds cpu and cuda plans`);
  if (flags.arch !== undefined && target !== 'cuda')
    throw new PlancError('PLANC_E301', '--arch applies to --target cuda only');
  const archs = target === 'cuda' ? parseArchs(flags.arch as string | undefined) : [];
  if (target === 'cuda') findNvcc(); // fail before the slow steps when nvcc is missing
  const limits = readPositionLimits(model);
  const profile = {
    maxBatch: positiveInt('max-batch', flags['max-batch'], DEFAULT_PROFILE.maxBatch),
    maxSrcLen: lengthLimit('max-src-len', flags['max-src-len'], DEFAULT_PROFILE.maxSrcLen, limits?.src, limits?.from),
    maxTgtLen: lengthLimit('max-tgt-len', flags['max-tgt-len'], DEFAULT_PROFILE.maxTgtLen, limits?.tgt, limits?.from),
    maxDims: parseMaxDims(flags['max-dim'] as string | undefined),
  };
  const ids = specialIds(flags);
  const tokenizer = chooseTokenizer(model, flags);
  const dumpAfter = flags['dump-after'] as string | undefined;
  checkDumpAfter(dumpAfter);
  const vocabSpec = flags.vocab === undefined ? undefined : parseVocabSpec(String(flags.vocab));
  const quantize = parseQuantize(flags.quantize as string | undefined, flags['quantize-layers'] as string | undefined);
  const fast = flags.fast === true;
  if (fast) {
    if ((vocabSpec && vocabSpec.method !== 'shortlist') || quantize)
      throw new PlancError(
        'PLANC_E301',
        `--fast chooses the quantization and the vocabulary itself: drop ${quantize ? '--quantize' : '--vocab'} (or drop --fast to ask for one; --vocab shortlist=FILE adds the shortlist to its search)`,
      );
    if (flags['eval-src'] === undefined)
      throw new PlancError(
        'PLANC_E301',
        '--fast measures every candidate plan against float32 on held-out text: give --eval-src FILE (held-out source sentences; --eval-ref FILE adds BLEU to the gate, --calibrate FILE adds the vocabulary clusters)',
      );
    if (target !== 'cpu')
      throw new PlancError('PLANC_E301', '--fast measures cpu plans: its int8 / int16 rungs run on the CPU only');
    if (flags['no-fuse'] === true)
      throw new PlancError(
        'PLANC_E301',
        '--fast quantizes planc.FusedMatMul and rewrites planc.ProjectTopK, which --no-fuse turns off',
      );
  }
  if (!vocabSpec && !quantize && !fast)
    for (const f of ['calibrate', 'eval-src', 'eval-ref'])
      if (flags[f] !== undefined)
        throw new PlancError('PLANC_E301', `--${f} applies to --vocab, --quantize and --fast only`);
  if (quantize?.mode === 'auto' && flags['eval-src'] === undefined)
    throw new PlancError(
      'PLANC_E301',
      '--quantize auto measures the plan against float32: give --eval-src FILE (held-out source sentences)',
    );
  if (quantize && flags['no-fuse'] === true)
    throw new PlancError(
      'PLANC_E301',
      '--quantize rewrites planc.FusedMatMul and planc.ProjectTopK, which --no-fuse turns off',
    );
  if (flags['eval-ref'] !== undefined && flags['eval-src'] === undefined)
    throw new PlancError('PLANC_E301', '--eval-ref needs --eval-src');
  if (vocabSpec?.method === 'clusters' && flags.calibrate === undefined)
    throw new PlancError(
      'PLANC_E301',
      '--vocab clusters=R,K needs --calibrate SOURCE_TEXT (source sentences, one per line)',
    );
  if (vocabSpec?.method === 'auto' && (flags.calibrate === undefined || flags['eval-src'] === undefined))
    throw new PlancError(
      'PLANC_E301',
      '--vocab auto measures R × K points under the accuracy gate: it needs --calibrate SOURCE_TEXT and --eval-src HELD_OUT_TEXT (--eval-ref for BLEU)',
    );
  if (vocabSpec?.method === 'shortlist' && flags.calibrate !== undefined && !fast)
    throw new PlancError('PLANC_E301', '--calibrate applies to --vocab clusters and auto only');
  if (vocabSpec && flags['no-fuse'] === true)
    throw new PlancError('PLANC_E301', '--vocab rewrites planc.ProjectTopK, which --no-fuse turns off');
  if (flags.tune !== true)
    for (const f of Object.keys(TUNE_OPTIONS))
      if (flags[f] !== undefined) throw new PlancError('PLANC_E301', `--${f} applies to --tune only`);
  const tune = flags.tune === true ? tuneRequest(flags) : undefined;
  if (tune && target === 'cuda')
    throw new PlancError(
      'PLANC_E301',
      '--tune measures cpu plans (cuda plans keep the heuristic launches of codegen/cuda/rules.ts, recorded in their tuning)',
    );
  const progress = new Progress(flags.quiet === true);
  progress.start(`importing ${model}`);
  const m = importModel(model);
  const built = await compile(
    m,
    {
      target,
      archs,
      ...profile,
      specialIds: ids,
      tokenizer: tokenizer && { bytes: tokenizer.bytes, kind: tokenizer.kind },
      options: { model: path.resolve(model) },
      disable: flags['no-fuse'] === true ? ['fuse'] : [],
      topk: flags.topk as number | undefined,
      stepTokens: flags['step-tokens'] as number | undefined,
      quantize: quantize && {
        ...quantize,
        evalSrc: flags['eval-src'] as string | undefined,
        evalRef: flags['eval-ref'] as string | undefined,
        calibrate: vocabSpec ? undefined : (flags.calibrate as string | undefined),
      },
      vocab:
        vocabSpec && !fast
          ? {
              spec: vocabSpec,
              calibrate: flags.calibrate as string | undefined,
              evalSrc: flags['eval-src'] as string | undefined,
              evalRef: flags['eval-ref'] as string | undefined,
            }
          : undefined,
      fast: fast
        ? {
            evalSrc: flags['eval-src'] as string,
            evalRef: flags['eval-ref'] as string | undefined,
            calibrate: flags.calibrate as string | undefined,
            shortlist: vocabSpec?.method === 'shortlist' ? vocabSpec : undefined,
          }
        : undefined,
      tune,
      explain:
        flags.explain === true
          ? (pass, node, why) => process.stderr.write(`  [${pass}] ${node}: declined, ${why}\n`)
          : undefined,
      dumpAfter,
      onDump: (name, text, what) => process.stderr.write(`\n=== ${what} after ${name} ===\n${text}\n`),
    },
    { progress },
  );
  progress.start(`writing ${out}`);
  const bytes = writePlanFile(out, built.header, built.blob);
  if (flags['emit-ts'] !== undefined)
    (await import('../codegen/emit-ts.ts')).writePlanTypes(String(flags['emit-ts']), out, built.header);
  progress.finish();
  if (flags.quiet !== true) {
    const h = built.header;
    const lines = [
      `plan ${out}: ${mb(bytes)}, target ${h.target.kind}${h.cuda ? ` ${h.target.archs.join(',')} (${h.cuda.programs.reduce((n, p) => n + p.calls.length, 0)} CUDA launches, ${new Set(h.cuda.kernels.map((k) => k.name)).size} kernels, nvcc ${h.cuda.nvccVersion}, fatbin ${mb(h.cuda.fatbin.length)})` : ''}, profile batch ≤ ${profile.maxBatch}, source ≤ ${profile.maxSrcLen}, target ≤ ${profile.maxTgtLen}`,
      `weights: ${h.weights.length} distinct tensors, ${mb(h.blobBytes)}`,
      `arena: ${mb(h.arena.bytes)} shared by ${h.programs.length} graph(s)`,
      ...(built.firstStepOnly
        ? [
            'decoder: sized for the first decoding step (decoder_sequence_length ≤ 1; --max-dim decoder_sequence_length=N for longer prefixes)',
          ]
        : []),
      tokenizer
        ? `tokenizer: ${tokenizer.kind}, ${path.basename(tokenizer.file)} (${(tokenizer.bytes.length / 1e3).toFixed(1)} kB)`
        : 'tokenizer: none (translate with --ids)',
      ...(built.vocab ? formatVocabReport(built.vocab) : []),
      ...(built.quantization ? formatQuantizationReport(built.quantization) : []),
      ...(built.tuning ? formatTuneReport(built.tuning, h) : []),
      ...built.reports.map(
        (r) =>
          `  ${r.graph.padEnd(18)} ${String(r.kernels).padStart(4)} kernels   arena ${mb(r.arenaBytes).padStart(9)}   lower bound ${mb(r.lowerBound).padStart(9)}   all tensors ${mb(r.tensorBytesSum).padStart(9)}   in-place ${r.inPlace}`,
      ),
      ...(built.fast ? formatFastReport(built.fast) : []),
      `done in ${progress.elapsed.toFixed(1)} s`,
    ];
    console.log(lines.join('\n'));
  }
  return 0;
}
