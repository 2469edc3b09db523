// planc's argument parser and help: each command's option table (CommandSpec) drives both; usage errors are PLANC_E301.
import { PlancError } from '../compiler/diagnostics.ts';

/** One option of a command: how it parses and what its help says. */
export interface OptionSpec {
  kind: 'boolean' | 'string' | 'number';
  /** A one-letter alias (`o` for `-o`). */
  short?: string;
  /** The value's name in the help (FILE, N, CODE); options with a value only. */
  value?: string;
  /** What it does, with its default: one or two sentences for `planc CMD --help`. */
  help: string;
}

/** A command's arguments: the one table parsing and `--help` both read. */
export interface CommandSpec {
  name: string;
  /** The positional arguments as the usage line shows them, e.g. `MODEL` or `PLAN`. */
  args: string;
  /** What the command does (the help's first paragraph; its first sentence is the line in `planc --help`). */
  summary: string;
  /** Long name (without --) → the option. To add an option, add an entry here: parsing and help follow. */
  options: Record<string, OptionSpec>;
  /** Paragraphs after the options: output formats, environment variables, examples. */
  notes?: string;
  /** How many positional arguments the command takes (default exactly 1). */
  positional?: [min: number, max: number];
}

/** Options every command takes (parsed here; main.ts acts on them). */
export const COMMON_OPTIONS: Record<string, OptionSpec> = {
  help: { kind: 'boolean', short: 'h', help: 'print this help and exit' },
  debug: {
    kind: 'boolean',
    help: 'on an error, print its stack trace too (without it: one line naming the PLANC_E code)',
  },
};

export interface Parsed {
  positional: string[];
  flags: Record<string, string | number | boolean>;
}

/** A command's options and the common ones, by long name. */
export function allOptions(spec: CommandSpec): Record<string, OptionSpec> {
  return { ...spec.options, ...COMMON_OPTIONS };
}

export function usageLine(spec: CommandSpec): string {
  return `planc ${spec.name} ${spec.args} [options]`;
}

/** True when argv asks for the command's help (-h / --help before a lone `--`). */
export function wantsHelp(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((a) => a === '-h' || a === '--help');
}

export function parseArgs(spec: CommandSpec, argv: string[]): Parsed {
  const positional: string[] = [];
  const flags: Record<string, string | number | boolean> = {};
  const options = allOptions(spec);
  const byShort = new Map(
    Object.entries(options)
      .filter(([, o]) => o.short)
      .map(([n, o]) => [o.short!, n]),
  );
  const usage = (msg: string): never => {
    throw new PlancError(
      'PLANC_E301',
      `${msg}\nusage: ${usageLine(spec)}   (planc ${spec.name} --help lists the options)`,
    );
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    const short = /^-[a-zA-Z]$/.test(a);
    if (!a.startsWith('--') && !short) {
      positional.push(a);
      continue;
    }
    const [given, inline] = (short ? [a.slice(1)] : a.slice(2).split(/=(.*)/s, 2)) as [string, string | undefined];
    const name = short ? byShort.get(given) : given;
    const opt = name === undefined ? undefined : options[name];
    if (!opt || !name) return usage(`unknown option ${short ? '-' : '--'}${given} for '${spec.name}'`);
    if (opt.kind === 'boolean') {
      if (inline !== undefined) usage(`option --${name} takes no value`);
      flags[name] = true;
      continue;
    }
    const v = inline ?? argv[++i];
    if (v === undefined)
      usage(`option ${short ? `-${given}` : `--${name}`} needs a value${opt.value ? ` (${opt.value})` : ''}`);
    if (opt.kind === 'number') {
      const n = v!.trim() === '' ? NaN : Number(v);
      if (!Number.isFinite(n)) usage(`option --${name} wants a number, got '${v}'`);
      flags[name] = n;
    } else flags[name] = v!;
  }
  const [min, max] = spec.positional ?? [1, 1];
  if (positional.length < min || positional.length > max)
    usage(
      `'${spec.name}' takes ${min === max ? min : `${min} to ${max}`} argument(s) (${spec.args}), got ${positional.length}`,
    );
  return { positional, flags };
}

/** An integer option in [min, max], or undefined when absent; PLANC_E301 naming the option otherwise. */
export function intOption(flags: Parsed['flags'], name: string, min: number, max: number): number | undefined {
  const v = flags[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new PlancError('PLANC_E301', `--${name} must be an integer in [${min}, ${max}], got ${String(v)}`);
  }
  return v;
}

const WIDTH = 100;

/** Words of `text` in lines of at most `width` columns, each after `indent` spaces. */
function wrap(text: string, indent: number, width = WIDTH): string[] {
  const lines: string[] = [];
  for (const para of text.split('\n')) {
    if (para.startsWith(' ')) {
      lines.push(para);
      continue;
    } // an indented line (an example) stays as it is
    let line = '';
    for (const word of para.split(' ')) {
      if (line && indent + line.length + 1 + word.length > width) {
        lines.push(line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    lines.push(line);
  }
  return lines.map((l) => `${' '.repeat(indent)}${l}`.trimEnd());
}

/** `planc CMD --help`: the usage line, the summary, one entry per option of the table (then the common ones), the notes. */
export function formatHelp(spec: CommandSpec): string {
  const col = 30;
  const entry = ([name, o]: [string, OptionSpec]): string => {
    const head = `  ${o.short ? `-${o.short}, ` : '    '}--${name}${o.kind === 'boolean' ? '' : ` ${o.value ?? (o.kind === 'number' ? 'N' : 'VALUE')}`}`;
    const body = wrap(o.help, col);
    if (head.length < col - 1) body[0] = head.padEnd(col) + body[0]!.slice(col);
    else body.unshift(head);
    return body.join('\n');
  };
  return [
    `usage: ${usageLine(spec)}`,
    '',
    ...wrap(spec.summary, 0),
    '',
    'options:',
    ...Object.entries(spec.options).map(entry),
    ...Object.entries(COMMON_OPTIONS).map(entry),
    ...(spec.notes ? ['', ...wrap(spec.notes, 0)] : []),
  ].join('\n');
}
