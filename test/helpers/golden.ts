// Golden-file comparison: the text must match test/golden/NAME exactly; only UPDATE_GOLDEN=1 writes (or rewrites) a file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../../compiler/paths.ts';

export function matchGolden(name: string, actual: string): void {
  const file = path.join(REPO_ROOT, 'test', 'golden', name);
  if (process.env.UPDATE_GOLDEN === '1') {
    fs.writeFileSync(file, actual);
    return;
  }
  if (!fs.existsSync(file))
    assert.unreachable(
      `golden file test/golden/${name} is missing: run the test with UPDATE_GOLDEN=1 to write it, then review it`,
    );
  assert.fixture(
    actual,
    fs.readFileSync(file, 'utf8'),
    `golden ${name} (UPDATE_GOLDEN=1 to accept a deliberate change)`,
  );
}
