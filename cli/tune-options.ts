// The tuning options `planc tune` and `planc optimize --tune` share, the request they make, and the summary lines they print.
import { PlancError } from '../compiler/diagnostics.ts';
import type { PlanHeader } from '../compiler/plan/types.ts';
import { defaultCacheFile } from '../optimize/tune-cache.ts';
import { deviceText } from '../optimize/tune-device.ts';
import type { TuneRequest, TuneSummary } from '../optimize/tune.ts';
import type { OptionSpec, Parsed } from './args.ts';

/** The tuning options `planc tune` and `planc optimize` share. */
export const TUNE_OPTIONS: Record<string, OptionSpec> = {
  'tuning-cache': {
    kind: 'string',
    value: 'FILE',
    help: `the tuning cache to read and update (default ${defaultCacheFile().replace(process.env.HOME ?? '\u0000', '~')}: $XDG_CACHE_HOME/planc/tuning.json); entries of another device, planc version or build of the native addon are never used, and are reported`,
  },
  'no-tuning-cache': { kind: 'boolean', help: 'measure everything and keep nothing' },
  'tune-batch': {
    kind: 'string',
    value: 'N,...',
    help: 'the batch sizes (rows per run) to tune for (default: 1, --max-batch and from 16 on the power of two nearest their geometric middle, 8 for 32); a choice must not be slower at any of them',
  },
  'tune-runs': {
    kind: 'number',
    value: 'N',
    help: 'timed runs per measurement, after 2 warm-up runs (default 7); the median counts, the spread is recorded',
  },
};

/** The tune request the flags ask for. */
export function tuneRequest(flags: Parsed['flags']): TuneRequest {
  if (flags['no-tuning-cache'] === true && flags['tuning-cache'] !== undefined)
    throw new PlancError('PLANC_E301', '--tuning-cache and --no-tuning-cache exclude each other');
  const runs = flags['tune-runs'];
  if (runs !== undefined && (typeof runs !== 'number' || !Number.isInteger(runs) || runs < 1))
    throw new PlancError('PLANC_E301', `--tune-runs must be a positive integer, got ${runs}`);
  const batches =
    flags['tune-batch'] === undefined
      ? undefined
      : String(flags['tune-batch'])
          .split(',')
          .map((x) => Number(x.trim()));
  if (batches?.some((b) => !Number.isInteger(b) || b < 1))
    throw new PlancError(
      'PLANC_E301',
      `--tune-batch ${flags['tune-batch']}: expected batch sizes ≥ 1, comma-separated`,
    );
  return {
    cacheFile: flags['no-tuning-cache'] === true ? null : (flags['tuning-cache'] as string | undefined),
    ...(runs !== undefined ? { runs } : {}),
    ...(batches ? { batches } : {}),
  };
}

/** What tuning did, as lines: the device, the cache, each changed call and each graph's end-to-end confirmation. */
export function formatTuneReport(s: TuneSummary, h: PlanHeader): string[] {
  const cut = (xs: string[]) =>
    xs
      .slice(0, 3)
      .map((x) => `    ${x.length > 160 ? `${x.slice(0, 157)}...` : x}`)
      .concat(xs.length > 3 ? [`    ... and ${xs.length - 3} more`] : []);
  const changed = h.tuning.filter((r) => r.alternatives?.length && !r.key.endsWith(':confirm') && r.choice !== 'auto');
  return [
    `tuning: ${s.calls} kernel calls on ${deviceText(s.device)} at ${s.points.map((p) => `batch ${p.batch}`).join(', ')} (source ${s.points[0]?.srcLen}, past ${s.points[0]?.past}); ${s.changed} changed from the default, ${s.measurements} plan variants measured, ${s.seconds.toFixed(1)} s`,
    `  cache ${s.cacheFile ?? '(none)'}: ${s.hits} hits, ${s.misses} misses${s.stale.length ? `, ${s.stale.length} stale (another planc version or addon build: not used)` : ''}${s.foreign.length ? `, ${s.foreign.length} foreign (another device: not used)` : ''}`,
    ...(s.stale.length ? ['  stale entries ignored:', ...cut(s.stale)] : []),
    ...(s.foreign.length ? ['  foreign entries ignored:', ...cut(s.foreign)] : []),
    ...changed.map((r) => `  ${r.key.padEnd(34)} ${r.choice.padEnd(8)} ${r.reason}`),
    ...h.tuning
      .filter((r) => r.key.endsWith(':confirm'))
      .map((r) => `  ${r.key.padEnd(34)} ${r.choice.padEnd(8)} ${r.reason}`),
    ...(s.rolledBack.length ? [`  rolled back (slower end to end): ${s.rolledBack.join(', ')}`] : []),
  ];
}
