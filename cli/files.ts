// Checks of the files a command reads and writes, made before any work: a named PlancError instead of a failure later.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PlancError } from '../compiler/diagnostics.ts';

/** An input file (`what`: how the user gave it, e.g. `--input` or `plan`) exists and is not a folder; PLANC_E006 otherwise. */
export function checkInputFile(file: string, what: string): void {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', `${what} ${file} does not exist`, { file });
  if (fs.statSync(file).isDirectory())
    throw new PlancError('PLANC_E006', `${what} ${file} is a folder, not a file`, { file });
}

/** An output file can be made: its folder exists and it is not itself a folder; PLANC_E006 naming the folder otherwise. */
export function checkOutputFile(file: string, what: string): void {
  const dir = path.dirname(path.resolve(file));
  if (!fs.existsSync(dir))
    throw new PlancError('PLANC_E006', `${what} ${file}: the folder ${dir} does not exist`, { file });
  if (!fs.statSync(dir).isDirectory())
    throw new PlancError('PLANC_E006', `${what} ${file}: ${dir} is not a folder`, { file });
  if (fs.existsSync(file) && fs.statSync(file).isDirectory())
    throw new PlancError('PLANC_E006', `${what} ${file} is a folder; give a file name`, { file });
}
