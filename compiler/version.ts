// planc's version, read from the package.json above this file (the one source: it holds the published version);
// plans record it and `planc --version` prints it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The `version` of the nearest package.json named planc above this module (works from the sources and a build). */
export function plancVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, 'package.json');
    try {
      const j = JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (j.name === 'planc' && j.version) return j.version;
    } catch {
      // no package.json here: look further up
    }
    const up = path.dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
}
