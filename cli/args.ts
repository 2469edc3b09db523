// A small argument parser for planc's commands: known flags only, clear usage errors (PLANC_E301).
import { PlancError } from '../compiler/diagnostics.ts';

export interface CommandSpec {
  name: string;
  usage: string;
  /** Flag name (without --) → its kind. */
  flags: Record<string, 'boolean' | 'string' | 'number'>;
  /** How many positional arguments the command takes (default exactly 1). */
  positional?: [min: number, max: number];
}

export interface Parsed {
  positional: string[];
  flags: Record<string, string | number | boolean>;
}

export function parseArgs(spec: CommandSpec, argv: string[]): Parsed {
  const positional: string[] = [];
  const flags: Record<string, string | number | boolean> = {};
  const usage = (msg: string): never => { throw new PlancError('PLANC_E301', `${msg}\nusage: ${spec.usage}`); };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const short = /^-[a-zA-Z]$/.test(a);
    if (!a.startsWith('--') && !short) { positional.push(a); continue; }
    const [name, inline] = (short ? [a.slice(1)] : a.slice(2).split('=', 2)) as [string, string | undefined];
    if (name === 'debug') continue;
    const kind = spec.flags[name];
    if (!kind) usage(`unknown option ${short ? '-' : '--'}${name} for '${spec.name}'`);
    if (kind === 'boolean') { flags[name] = true; continue; }
    const v = inline ?? argv[++i];
    if (v === undefined) usage(`option ${short ? '-' : '--'}${name} needs a value`);
    if (kind === 'number') {
      const n = Number(v);
      if (!Number.isFinite(n)) usage(`option --${name} wants a number, got '${v}'`);
      flags[name] = n;
    } else flags[name] = v!;
  }
  const [min, max] = spec.positional ?? [1, 1];
  if (positional.length < min || positional.length > max) usage(`'${spec.name}' takes ${min === max ? min : `${min} to ${max}`} argument(s), got ${positional.length}`);
  return { positional, flags };
}
