// The persisted tuning cache (--tuning-cache FILE, default $XDG_CACHE_HOME/planc/tuning.json): measured times keyed by
// what decides them; an entry of another device or planc version is never used, and reported as foreign or stale.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fail } from '../compiler/diagnostics-catalog.ts';

/**
 * Times of one alternative at each operating point: medians and spreads (max - min) in µs, or why it did not run;
 * between: how far its slowest round's median was from its fastest (µs), where it was measured in rounds.
 */
export interface CachedAlternative {
  variant: string;
  micros: number[];
  spread: number[];
  note: string;
  between?: number[];
}

export interface CacheEntry {
  /** What the times are of (kernel, static dims, dtypes, arguments, variant set, operating points), as JSON text. */
  key: string;
  device: string;
  plancVersion: string;
  alternatives: CachedAlternative[];
}

/** How a lookup went: hit, miss (nothing for the key), or only entries of another device / planc version. */
export type Lookup =
  | { kind: 'hit'; entry: CacheEntry }
  | { kind: 'miss' }
  | { kind: 'stale' | 'foreign'; entry: CacheEntry };

export const CACHE_FORMAT = 1;

/** The default cache file: $XDG_CACHE_HOME/planc/tuning.json, else ~/.cache/planc/tuning.json. */
export function defaultCacheFile(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'planc', 'tuning.json');
}

export class TuningCache {
  private readonly entries = new Map<string, CacheEntry>();
  private dirty = false;

  private constructor(readonly file: string | undefined) {}

  /** Reads the cache file (absent: an empty cache); a file that is not a planc tuning cache is refused. */
  static open(file: string | undefined): TuningCache {
    const c = new TuningCache(file);
    if (!file || !fs.existsSync(file)) return c;
    let j: { format?: number; entries?: CacheEntry[] };
    try {
      j = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      fail(
        'optionProblem',
        {
          option: 'tuningCache',
          value: file,
          why: `not JSON (${(e as Error).message}); delete it or name another file`,
        },
        { file },
      );
    }
    if (j.format !== CACHE_FORMAT || !Array.isArray(j.entries))
      fail(
        'optionProblem',
        {
          option: 'tuningCache',
          value: file,
          why: `not a planc tuning cache of format ${CACHE_FORMAT}; delete it or name another file`,
        },
        { file },
      );
    for (const e of j.entries) c.entries.set(TuningCache.id(e.key, e.device, e.plancVersion), e);
    return c;
  }

  private static id(key: string, device: string, version: string): string {
    return `${key}\u0000${device}\u0000${version}`;
  }

  /** The entry of this key for this device and version; else whether another device's or version's exists. */
  lookup(key: string, device: string, version: string): Lookup {
    const hit = this.entries.get(TuningCache.id(key, device, version));
    if (hit) return { kind: 'hit', entry: hit };
    let other: Lookup = { kind: 'miss' };
    for (const e of this.entries.values()) {
      if (e.key !== key) continue;
      if (e.device !== device) other = { kind: 'foreign', entry: e };
      else if (e.plancVersion !== version) return { kind: 'stale', entry: e };
    }
    return other;
  }

  put(e: CacheEntry): void {
    this.entries.set(TuningCache.id(e.key, e.device, e.plancVersion), e);
    this.dirty = true;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Writes the cache when it changed (atomically: a temporary file renamed over it); entries sorted, so the file is stable. */
  save(): void {
    if (!this.file || !this.dirty) return;
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    const entries = [...this.entries.values()].sort((a, b) =>
      a.key < b.key
        ? -1
        : a.key > b.key
          ? 1
          : a.device.localeCompare(b.device) || a.plancVersion.localeCompare(b.plancVersion),
    );
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, `${JSON.stringify({ format: CACHE_FORMAT, entries }, null, 1)}\n`);
    fs.renameSync(tmp, this.file);
    this.dirty = false;
  }
}
