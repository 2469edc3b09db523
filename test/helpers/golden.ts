// Golden-file comparison: UPDATE_GOLDEN=1 rewrites the file, otherwise the text must match it exactly.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../../compiler/paths.ts';

export function matchGolden(name: string, actual: string): void {
  const file = path.join(REPO_ROOT, 'test', 'golden', name);
  if (process.env.UPDATE_GOLDEN === '1' || !fs.existsSync(file)) {
    if (process.env.CI && !fs.existsSync(file)) assert.unreachable(`golden file ${name} is missing (run with UPDATE_GOLDEN=1 locally)`);
    fs.writeFileSync(file, actual);
    return;
  }
  assert.fixture(actual, fs.readFileSync(file, 'utf8'), `golden ${name} (UPDATE_GOLDEN=1 to accept a deliberate change)`);
}
