// The diagnostics catalog: one entry per message template, with its code and its parameters (as the TypeScript
// compiler's diagnosticMessages). Library code throws from here with `fail(id, params, where)`; the parameters are
// checked by tsc, and a caller switches on `e.code` / `e.template.id` and reads the fields, not the text.
//
// A template names the options it concerns through `opt` (libraryName: `topk`), never by a command-line flag: the CLI
// words the same error with its flags (cli/option-errors.ts, one table), e.g. `--topk 3: it must be ...`.
//
// What remains free-form: the other codes' messages are written at their throw sites (`new PlancError(code, text)`),
// each under one code of CODES; those that name an option do so through the same `opt` namer
// (`new PlancError(code, (opt) => ...)`), so no library message names a flag (test/diagnostics.test.ts checks).
import {
  type Code,
  type ErrorDetail,
  libraryName,
  type OptionNamer,
  PlancError,
  type Text,
  type Where,
} from './diagnostics.ts';

/** A value as a message shows it: strings as they are, the rest as JSON. */
function shown(v: unknown): string {
  return typeof v === 'string' ? v : json(v);
}

/** A value as an assignment shows it (`beamSize = 0`, `earlyStopping = "always"`); what JSON cannot say (a BigInt, a cycle) as String does. */
function json(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return typeof v === 'bigint' ? `${v}n` : String(v);
  }
}

/** A text with its options named by `opt`. */
export function worded(t: Text, opt: OptionNamer): string {
  return typeof t === 'string' ? t : t(opt);
}

/** The facts of an option error: the option (by its library name), the value given, what it must be. */
export interface OptionFacts {
  option: string;
  value: unknown;
  /** Completes "it must be ..." (e.g. 'an integer in [1, 64]'); may name other options through `opt`. */
  expected: Text;
}

interface Entry<P> {
  code: Code;
  text: (p: P) => Text;
}

const entry = <P>(code: Code, text: (p: P) => Text): Entry<P> => ({ code, text });

/** Every message template, by id. Add entries freely; a code may carry several templates, a template one code. */
export const MESSAGES = {
  /** A library option out of its range (compile, runtime, serve settings). The CLI words it `--flag value: it must be ...`. */
  badOption: entry<OptionFacts>(
    'PLANC_E302',
    (p) => (opt) => `${opt(p.option)} = ${json(p.value)}; it must be ${worded(p.expected, opt)}`,
  ),
  /** A library option that is wrong for a reason other than its range (a missing companion option, an unusable file). */
  optionProblem: entry<{ option: string; value?: unknown; why: Text }>('PLANC_E302', (p) => (opt) => {
    const why = worded(p.why, opt);
    return `${opt(p.option)}${p.value === undefined ? '' : ` ${shown(p.value)}`}: ${why}`;
  }),
  /** An environment variable with a value planc cannot use. */
  badEnvironment: entry<{ variable: string; value: string; expected: string }>(
    'PLANC_E302',
    (p) => `${p.variable}=${p.value}: expected ${p.expected}`,
  ),
  /** A decoding option out of range, or one this plan or strategy cannot decode with. */
  badDecodingOption: entry<OptionFacts>(
    'PLANC_E411',
    (p) => (opt) => `bad decoding option: ${opt(p.option)} = ${json(p.value)}; it must be ${worded(p.expected, opt)}`,
  ),
  /** Decoding options that are not an object, name no option, or are wrong together (free text). */
  decodingOptions: entry<{ why: Text }>('PLANC_E411', (p) => (opt) => `bad decoding option: ${worded(p.why, opt)}`),
  /** A plan or a runtime object (RowBatch, StepRunner) used after close / release. */
  closed: entry<{ what: string; how?: string }>('PLANC_E412', (p) => `this ${p.what} was ${p.how ?? 'closed'}`),
} as const;

export type MessageId = keyof typeof MESSAGES;
/** The parameters of template `K`. */
export type MessageParams<K extends MessageId> = Parameters<(typeof MESSAGES)[K]['text']>[0];

/** The structured detail of an error whose parameters name an option (ErrorDetail: option, value, expected). */
function detailOf(params: object): ErrorDetail {
  const p = params as Partial<OptionFacts>;
  if (typeof p.option !== 'string') return {};
  const d: ErrorDetail = { option: p.option, value: p.value };
  if (p.expected !== undefined) d.expected = worded(p.expected, libraryName);
  return d;
}

/** The error of template `id` with `params`, where it points. */
export function diagnostic<K extends MessageId>(id: K, params: MessageParams<K>, where: Where = {}): PlancError {
  const m = MESSAGES[id] as Entry<MessageParams<K>>;
  return new PlancError(m.code, m.text(params), where, detailOf(params), {
    id,
    params: params as Record<string, unknown>,
  });
}

/** Throws the error of template `id` with `params`. */
export function fail<K extends MessageId>(id: K, params: MessageParams<K>, where: Where = {}): never {
  throw diagnostic(id, params, where);
}
