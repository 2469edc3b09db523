// `planc optimize MODEL -o PLAN`: parses the options, imports the model, compiles it (optimize/compile.ts), writes and reports the plan.
import * as path from 'node:path';
import { PlancError } from '../compiler/diagnostics.ts';
import { importModel } from '../compiler/onnx/import-model.ts';
import { readPositionLimits } from '../compiler/onnx/position-limits.ts';
import { writePlanFile } from '../compiler/plan/format.ts';
import { parseVocabSpec } from '../compiler/vocab/spec.ts';
import type { SpecialIds } from '../codegen/build-plan.ts';
import { findNvcc, parseArchs } from '../codegen/cuda/nvcc.ts';
import { DEFAULT_PROFILE } from '../codegen/profile.ts';
import { checkDumpAfter, compile } from '../optimize/compile.ts';
import { parseArgs, type CommandSpec } from './args.ts';
import { Progress } from './progress.ts';
import { findTokenizer, type TokenizerFile } from './tokenizer-file.ts';
import { formatVocabReport } from './vocab.ts';

export const OPTIMIZE: CommandSpec = {
  name: 'optimize',
  usage: 'planc optimize MODEL -o PLAN [--target cpu|cuda] [--arch sm_80,sm_90] [--max-batch N] [--max-src-len N] [--max-tgt-len N] [--max-dim NAME=N,...] [--tokenizer FILE | --no-tokenizer] [--decoder-start-id N] [--eos-id N] [--pad-id N] [--unk-id N] [--no-fuse] [--step-tokens N (decoder steps of 1..N new tokens; default 1)] [--topk N (default for translation models: exact beams up to max(4, num_beams) besides banned ids, 8 without any; 0 keeps logits)] [--vocab shortlist=FILE[,first=N,best=N] | --vocab clusters=R,K --calibrate SOURCE_TEXT] [--eval-src FILE [--eval-ref FILE]] [--dump-after PASS|all] [--explain] [--quiet]',
  flags: { o: 'string', output: 'string', target: 'string', arch: 'string', 'max-batch': 'number', 'max-src-len': 'number', 'max-tgt-len': 'number', 'max-dim': 'string', quiet: 'boolean', 'no-fuse': 'boolean', 'step-tokens': 'number', topk: 'number', 'dump-after': 'string', explain: 'boolean',
    vocab: 'string', calibrate: 'string', 'eval-src': 'string', 'eval-ref': 'string',
    tokenizer: 'string', 'no-tokenizer': 'boolean', 'decoder-start-id': 'number', 'eos-id': 'number', 'pad-id': 'number', 'unk-id': 'number' },
};

const mb = (b: number) => `${(b / 1e6).toFixed(1)} MB`;

function positiveInt(flag: string, v: unknown, def: number): number {
  if (v === undefined) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new PlancError('PLANC_E301', `--${flag} must be a positive integer, got ${v}`);
  return v;
}

/**
 * A length bound of the profile: the flag's value, refused beyond the model's position table; by default the
 * default bound, lowered to the table's size when that is smaller.
 */
function lengthLimit(flag: string, v: unknown, def: number, table: number | undefined, from: string | undefined): number {
  if (v === undefined) return table === undefined ? def : Math.min(def, table);
  const n = positiveInt(flag, v, def);
  if (table !== undefined && n > table) {
    throw new PlancError('PLANC_E301', `--${flag} ${n} is beyond the model's position table: it covers ${table} positions (${from})`);
  }
  return n;
}

function parseMaxDims(s: string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of (s ?? '').split(',').filter((x) => x)) {
    const m = /^([\w.:-]+)=(\d+)$/.exec(part.trim());
    if (!m) throw new PlancError('PLANC_E301', `--max-dim wants NAME=N[,NAME=N...], got '${part}'`);
    out[m[1]!] = Number(m[2]);
  }
  return out;
}

function tokenId(flag: string, v: unknown): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new PlancError('PLANC_E301', `--${flag} must be a token id (an integer ≥ 0), got ${v}`);
  return v;
}

function specialIds(flags: Record<string, unknown>): SpecialIds {
  return {
    decoderStartId: tokenId('decoder-start-id', flags['decoder-start-id']), eosId: tokenId('eos-id', flags['eos-id']),
    padId: tokenId('pad-id', flags['pad-id']), unkId: tokenId('unk-id', flags['unk-id']),
  };
}

function chooseTokenizer(model: string, flags: Record<string, unknown>): TokenizerFile | undefined {
  if (flags['no-tokenizer'] === true) {
    if (flags.tokenizer !== undefined) throw new PlancError('PLANC_E301', '--tokenizer and --no-tokenizer exclude each other');
    return undefined;
  }
  return findTokenizer(model, flags.tokenizer as string | undefined);
}

export async function runOptimize(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(OPTIMIZE, argv);
  const model = positional[0]!;
  const out = (flags.o ?? flags.output) as string | undefined;
  if (!out) throw new PlancError('PLANC_E301', `optimize needs -o PLAN\nusage: ${OPTIMIZE.usage}`);
  const target = (flags.target as string | undefined) ?? 'cpu';
  if (target !== 'cpu' && target !== 'cuda') throw new PlancError('PLANC_E301', `--target ${target}: planc builds cpu and cuda plans`);
  if (flags.arch !== undefined && target !== 'cuda') throw new PlancError('PLANC_E301', '--arch applies to --target cuda only');
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
  if (!vocabSpec) for (const f of ['calibrate', 'eval-src', 'eval-ref']) if (flags[f] !== undefined) throw new PlancError('PLANC_E301', `--${f} applies to --vocab only`);
  if (flags['eval-ref'] !== undefined && flags['eval-src'] === undefined) throw new PlancError('PLANC_E301', '--eval-ref needs --eval-src');
  if (vocabSpec?.method === 'clusters' && flags.calibrate === undefined) throw new PlancError('PLANC_E301', '--vocab clusters=R,K needs --calibrate SOURCE_TEXT (source sentences, one per line)');
  if (vocabSpec?.method === 'shortlist' && flags.calibrate !== undefined) throw new PlancError('PLANC_E301', '--calibrate applies to --vocab clusters only');
  if (vocabSpec && flags['no-fuse'] === true) throw new PlancError('PLANC_E301', '--vocab rewrites planc.ProjectTopK, which --no-fuse turns off');
  const progress = new Progress(flags.quiet === true);
  progress.start(`importing ${model}`);
  const m = importModel(model);
  const built = await compile(m, {
    target, archs, ...profile, specialIds: ids, tokenizer: tokenizer && { bytes: tokenizer.bytes, kind: tokenizer.kind },
    options: { model: path.resolve(model) },
    disable: flags['no-fuse'] === true ? ['fuse'] : [], topk: flags.topk as number | undefined, stepTokens: flags['step-tokens'] as number | undefined,
    vocab: vocabSpec && {
      spec: vocabSpec, calibrate: flags.calibrate as string | undefined, evalSrc: flags['eval-src'] as string | undefined, evalRef: flags['eval-ref'] as string | undefined,
    },
    explain: flags.explain === true ? (pass, node, why) => process.stderr.write(`  [${pass}] ${node}: declined, ${why}\n`) : undefined,
    dumpAfter, onDump: (name, text, what) => process.stderr.write(`\n=== ${what} after ${name} ===\n${text}\n`),
  }, { progress });
  progress.start(`writing ${out}`);
  const bytes = writePlanFile(out, built.header, built.blob);
  progress.finish();
  if (flags.quiet !== true) {
    const h = built.header;
    const lines = [
      `plan ${out}: ${mb(bytes)}, target ${h.target.kind}${h.cuda ? ` ${h.target.archs.join(',')} (${h.cuda.programs.reduce((n, p) => n + p.calls.length, 0)} CUDA launches, ${new Set(h.cuda.kernels.map((k) => k.name)).size} kernels, nvcc ${h.cuda.nvccVersion}, fatbin ${mb(h.cuda.fatbin.length)})` : ''}, profile batch ≤ ${profile.maxBatch}, source ≤ ${profile.maxSrcLen}, target ≤ ${profile.maxTgtLen}`,
      `weights: ${h.weights.length} distinct tensors, ${mb(h.blobBytes)}`,
      `arena: ${mb(h.arena.bytes)} shared by ${h.programs.length} graph(s)`,
      ...(built.firstStepOnly ? ['decoder: sized for the first decoding step (decoder_sequence_length ≤ 1; --max-dim decoder_sequence_length=N for longer prefixes)'] : []),
      tokenizer ? `tokenizer: ${tokenizer.kind}, ${path.basename(tokenizer.file)} (${(tokenizer.bytes.length / 1e3).toFixed(1)} kB)` : 'tokenizer: none (translate with --ids)',
      ...(built.vocab ? formatVocabReport(built.vocab) : []),
      ...built.reports.map((r) => `  ${r.graph.padEnd(18)} ${String(r.kernels).padStart(4)} kernels   arena ${mb(r.arenaBytes).padStart(9)}   lower bound ${mb(r.lowerBound).padStart(9)}   all tensors ${mb(r.tensorBytesSum).padStart(9)}   in-place ${r.inPlace}`),
      `done in ${progress.elapsed.toFixed(1)} s`,
    ];
    console.log(lines.join('\n'));
  }
  return 0;
}
