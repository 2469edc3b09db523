// The HRT model contract (docs/hrt.md 1.4): config.json's hrt section read into HrtFacts, and the graphs checked against it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PlancError } from '../../compiler/diagnostics.ts';
import type { Graph, HrtFacts, Model } from '../../compiler/ir.ts';
import { NAT_GRAPH, NAT_MASK_INPUT, POSITION_IDS_INPUT, STEP_INPUT } from '../../compiler/plan/io-names.ts';
import { dimEq, shapeStr } from '../../compiler/symbolic.ts';
import { readJson } from './decoding-facts.ts';

/** The contract version this planc reads. */
export const HRT_CONTRACT_VERSION = 1;

/** config.json's hrt section as the file spells it. */
interface HrtSection {
  version?: unknown;
  chunk_sizes?: unknown;
  bos_k_ids?: unknown;
  mask_id?: unknown;
  input_vocab_size?: unknown;
  nat_graph?: unknown;
}

/** The model file of an HRT folder's Skip-CMLM graph (config.json hrt.nat_graph), when config.json has an hrt section. */
export function hrtNatFile(dir: string): string | undefined {
  const h = readJson(dir, 'config.json')?.hrt as HrtSection | undefined;
  return h && typeof h === 'object' && typeof h.nat_graph === 'string' ? h.nat_graph : undefined;
}

function fail(dir: string, problems: string[]): never {
  throw new PlancError(
    'PLANC_E013',
    `the model does not meet the HRT contract (docs/hrt.md 1.4): ${problems.join('; ')}`,
    { file: path.join(dir, 'config.json') },
  );
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

/**
 * config.json's hrt section (checks 1–3 of docs/hrt.md 1.4) as the plan records it; undefined when the section is
 * absent (an ordinary model). A section that breaks the contract fails with PLANC_E013 listing every problem.
 */
export function readHrtFacts(dir: string, eosId: number | undefined): HrtFacts | undefined {
  const config = readJson(dir, 'config.json');
  const h = config?.hrt as HrtSection | undefined;
  if (h === undefined) return undefined;
  const problems: string[] = [];
  if (typeof h !== 'object' || h === null || Array.isArray(h)) fail(dir, ['hrt is not an object']);
  if (h.version !== HRT_CONTRACT_VERSION)
    problems.push(`hrt.version is ${JSON.stringify(h.version)}, this planc reads version ${HRT_CONTRACT_VERSION}`);
  const rows = isInt(h.input_vocab_size) && h.input_vocab_size >= 1 ? h.input_vocab_size : undefined;
  if (rows === undefined) problems.push('hrt.input_vocab_size is not a positive integer');
  const sizes =
    Array.isArray(h.chunk_sizes) && h.chunk_sizes.every((k) => isInt(k) && k >= 2)
      ? [...new Set(h.chunk_sizes as number[])].sort((a, b) => a - b)
      : undefined;
  if (!sizes) problems.push('hrt.chunk_sizes is not a list of integers ≥ 2');
  const bos =
    typeof h.bos_k_ids === 'object' && h.bos_k_ids !== null && !Array.isArray(h.bos_k_ids)
      ? (h.bos_k_ids as Record<string, unknown>)
      : undefined;
  if (!bos) problems.push('hrt.bos_k_ids is not an object of chunk size → start id');
  const inRows = (what: string, v: unknown): v is number => {
    if (isInt(v) && v >= 0 && (rows === undefined || v < rows)) return true;
    problems.push(
      `${what} = ${JSON.stringify(v)} is not an id in [0, input_vocab_size${rows === undefined ? '' : ` = ${rows}`})`,
    );
    return false;
  };
  const mask = inRows('hrt.mask_id', h.mask_id) ? h.mask_id : undefined;
  const bosIds: number[] = [];
  const start = config?.decoder_start_token_id;
  const k1 = bos?.['1'] ?? start;
  if (inRows('hrt.bos_k_ids["1"] (or decoder_start_token_id)', k1)) bosIds.push(k1);
  for (const k of sizes ?? []) {
    const id = bos?.[String(k)];
    if (id === undefined) {
      problems.push(`hrt.bos_k_ids has no start id for chunk size ${k}`);
      continue;
    }
    if (inRows(`hrt.bos_k_ids["${k}"]`, id)) bosIds.push(id);
  }
  const specials = [...bosIds.slice(1), ...(mask === undefined ? [] : [mask])];
  if (new Set(specials).size !== specials.length)
    problems.push(`the [BOS_k] ids and hrt.mask_id must be distinct (${specials.join(', ')})`);
  if (eosId !== undefined && specials.includes(eosId))
    problems.push(`a [BOS_k] id or hrt.mask_id equals the eos id ${eosId}`);
  if (typeof h.nat_graph !== 'string' || !fs.existsSync(path.join(dir, h.nat_graph)))
    problems.push(`hrt.nat_graph ${JSON.stringify(h.nat_graph)} is not a file of the model folder`);
  if (problems.length) fail(dir, problems);
  const maxPositions =
    isInt(config?.max_position_embeddings) && (config.max_position_embeddings as number) > 0
      ? (config.max_position_embeddings as number)
      : 0;
  return {
    version: HRT_CONTRACT_VERSION,
    chunkSizes: [1, ...sizes!],
    bosIds,
    maskId: mask!,
    inputVocabSize: rows!,
    maxPositions,
  };
}

/** The NAT graph's inputs, in order, and their dtypes (docs/hrt.md 1.2). */
const NAT_INPUTS: [string, string][] = [
  [STEP_INPUT, 'int64'],
  [POSITION_IDS_INPUT, 'int64'],
  [NAT_MASK_INPUT, 'int64'],
  ['encoder_attention_mask', 'int64'],
  ['encoder_hidden_states', 'float32'],
];

/** Rows of the embedding table `input_ids` is gathered from (the Gather whose indices are input_ids), when constant. */
function embeddingRows(model: Model, g: Graph): number | undefined {
  const gather = g.nodes.find((n) => n.op === 'Gather' && n.inputs[1] === STEP_INPUT);
  const w = gather && g.initializers.get(gather.inputs[0]!);
  return w === undefined ? undefined : model.weights.get(w)?.tensor.dims[0];
}

/**
 * Checks 4–6 of docs/hrt.md 1.4 on an imported HRT model: position_ids inputs shaped as input_ids on both decoders, the
 * NAT graph's inputs and its one logits output, equal logits widths = vocab_size, an embedding with the input-only rows.
 * Fails with PLANC_E013 listing every problem, naming the graphs.
 */
export function checkHrtGraphs(model: Model, hrt: HrtFacts, vocabSize: number | undefined): void {
  const problems: string[] = [];
  const type = (g: Graph, name: string) => g.values.get(name)?.type;
  for (const name of ['decoder', 'decoder_with_past', NAT_GRAPH]) {
    const g = model.graphs.get(name);
    if (!g) {
      problems.push(`no '${name}' graph`);
      continue;
    }
    const ids = type(g, STEP_INPUT);
    const pos = type(g, POSITION_IDS_INPUT);
    if (!g.inputs.includes(POSITION_IDS_INPUT) || !pos)
      problems.push(`graph '${name}' has no input '${POSITION_IDS_INPUT}'`);
    else if (
      pos.dtype !== 'int64' ||
      !ids?.shape ||
      !pos.shape ||
      pos.shape.length !== ids.shape.length ||
      !pos.shape.every((d, i) => dimEq(d, ids.shape![i]!))
    ) {
      problems.push(
        `graph '${name}' input '${POSITION_IDS_INPUT}' is ${pos.dtype}${shapeStr(pos.shape)}, not int64 shaped as '${STEP_INPUT}' ${shapeStr(ids?.shape)}`,
      );
    }
    const logits = type(g, 'logits');
    const w = logits?.shape?.at(-1);
    if (vocabSize !== undefined && w !== undefined && w !== vocabSize)
      problems.push(
        `graph '${name}' logits are ${String(typeof w === 'number' ? w : w.key)} wide, not vocab_size = ${vocabSize}`,
      );
    const rows = embeddingRows(model, g);
    if (rows !== undefined && rows < hrt.inputVocabSize)
      problems.push(
        `graph '${name}' embeds input_ids in a table of ${rows} rows, fewer than hrt.input_vocab_size = ${hrt.inputVocabSize}`,
      );
  }
  const nat = model.graphs.get(NAT_GRAPH);
  if (nat) {
    const got = nat.inputs.map((i) => `${i}:${type(nat, i)?.dtype ?? '?'}`);
    const want = NAT_INPUTS.map(([n, t]) => `${n}:${t}`);
    if (got.join() !== want.join())
      problems.push(`graph '${NAT_GRAPH}' takes (${got.join(', ')}), the contract (${want.join(', ')})`);
    const logits = type(nat, 'logits');
    if (nat.outputs.join() !== 'logits' || logits?.dtype !== 'float32' || logits.shape?.length !== 3)
      problems.push(
        `graph '${NAT_GRAPH}' must have one output 'logits' float32 [batch, tokens, vocab] (it has ${nat.outputs.join(', ') || 'none'})`,
      );
  }
  if (problems.length)
    throw new PlancError(
      'PLANC_E013',
      `the model does not meet the HRT contract (docs/hrt.md 1.4): ${problems.join('; ')}`,
      { file: model.sources[NAT_GRAPH] ?? Object.values(model.sources)[0] },
    );
}
