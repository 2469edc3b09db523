// The zoo of Hugging Face exports in ../shared/models/zoo: its families and their reference.json.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sharedDir } from '../../compiler/paths.ts';

/** What reference.json holds (the fields tests read). */
export interface ZooReference {
  src_text: string[];
  src_ids: number[][];
  greedy_ids_hf_generation_config: number[][];
}

/** The zoo folder, or undefined without ../shared. */
export const ZOO = sharedDir() && path.join(sharedDir()!, 'models', 'zoo');

/** The families present (folders with a reference.json), sorted; none without the zoo. */
export function zooFamilies(): string[] {
  if (!ZOO || !fs.existsSync(ZOO)) return [];
  return fs
    .readdirSync(ZOO)
    .filter((f) => fs.existsSync(path.join(ZOO, f, 'reference.json')))
    .sort();
}

export function zooReference(family: string): ZooReference {
  return JSON.parse(fs.readFileSync(path.join(ZOO!, family, 'reference.json'), 'utf8'));
}
