// The longest source and target a model's position table covers, from its config.json (learned or fixed tables).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readJson } from './decoding-facts.ts';

export interface PositionLimits {
  /** Largest source length the encoder's positions cover, when the model has such a table. */
  src?: number;
  /** Largest target length the decoder's positions cover. */
  tgt?: number;
  /** Where the numbers come from (for messages): the config file and its key. */
  from: string;
}

/**
 * Reads max_position_embeddings / n_positions (one table size for both sides) or max_source_positions /
 * max_target_positions (FSMT-style) from config.json beside the model. Models with relative positions (T5) have
 * none of these: no limit. No config.json gives undefined; one that is not a JSON object is PLANC_E008.
 */
export function readPositionLimits(model: string): PositionLimits | undefined {
  const dir = fs.existsSync(model) && fs.statSync(model).isDirectory() ? model : path.dirname(model);
  const j = readJson(dir, 'config.json');
  if (!j) return undefined;
  const file = path.join(dir, 'config.json');
  const int = (k: string) =>
    typeof j[k] === 'number' && Number.isInteger(j[k]) && (j[k] as number) > 0 ? (j[k] as number) : undefined;
  const both = int('max_position_embeddings') ?? int('n_positions');
  const bothKey = int('max_position_embeddings') !== undefined ? 'max_position_embeddings' : 'n_positions';
  const src = int('max_source_positions') ?? both;
  const tgt = int('max_target_positions') ?? both;
  if (src === undefined && tgt === undefined) return undefined;
  const keys =
    int('max_source_positions') !== undefined || int('max_target_positions') !== undefined
      ? 'max_source_positions / max_target_positions'
      : bothKey;
  return { src, tgt, from: `${keys} in ${file}` };
}
