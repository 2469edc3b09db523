// Diagnostics: planc's errors with stable codes, naming the file, graph, node and op they concern. The message templates
// with their parameters are in diagnostics-catalog.ts (fail / diagnostic); this file holds the codes and the error type.
/** Stable error codes. Add new ones at the end of a group; never renumber. */
export const CODES = {
  // reading files
  PLANC_E001: 'not an ONNX model (truncated or not protobuf)',
  PLANC_E002: 'external data file missing',
  PLANC_E003: 'external data out of range',
  PLANC_E004: 'unsupported dtype',
  PLANC_E005: 'unsupported operators',
  PLANC_E006: 'file not found',
  PLANC_E007: 'malformed tensor',
  PLANC_E008: 'malformed model',
  PLANC_E009: 'not a seq2seq model directory',
  PLANC_E010: 'tokenizer file missing, ambiguous or unreadable',
  PLANC_E011: 'special token ids missing',
  PLANC_E012: 'input text is not valid UTF-8',
  PLANC_E013: 'model does not meet the HRT contract (docs/hrt.md)',
  // IR verification
  PLANC_E101: 'graph has a cycle',
  PLANC_E102: 'dangling input (value never defined)',
  PLANC_E103: 'value defined twice',
  PLANC_E104: 'dtype mismatch',
  PLANC_E105: 'shape mismatch',
  PLANC_E106: 'graph output not defined',
  // inference and evaluation
  PLANC_E201: 'shape inference failed',
  PLANC_E202: 'evaluation failed',
  PLANC_E203: 'bad attribute',
  PLANC_E204: 'bad feed',
  // options and command line
  PLANC_E301: 'bad command-line usage (thrown by cli/ only: the library reports its options with PLANC_E302)',
  PLANC_E302: 'bad option value (an option given to the library: compile, runtime or serve settings, environment)',
  // plans
  PLANC_E401: 'corrupt or truncated plan',
  PLANC_E402: 'plan from an incompatible format version',
  PLANC_E403: 'plan does not fit this runtime',
  PLANC_E404: 'cannot lower the model',
  PLANC_E405:
    'bad feed for a plan (its inputs, token ids, or a decoding step called with rows or tokens it cannot take)',
  PLANC_E406: 'native runtime error',
  PLANC_E407: 'plan has no tokenizer',
  PLANC_E408: "source over the plan's length limit",
  PLANC_E409: 'unknown target language',
  PLANC_E410: 'plan cannot decode with strategy hrt (no HRT contract, or a chunk size it does not support)',
  PLANC_E411: 'bad decoding option (out of range, or one this plan or strategy cannot decode with)',
  PLANC_E412: 'plan or runtime object used after it was closed',
  // vocabulary projection rewrite
  PLANC_E501: 'bad vocab-rewrite input (shortlist, calibration or evaluation data)',
  // CUDA code generation
  PLANC_E601: 'CUDA toolchain (nvcc) missing or failing',
  PLANC_E602: 'kernel has no CUDA template',
  // serving (planc serve)
  PLANC_E701: 'bad request (malformed body, wrong types, unknown field or option)',
  PLANC_E702: 'server busy or shutting down (queue full, draining)',
  PLANC_E703: 'request too large (body bytes or sentences)',
  PLANC_E704: 'request cancelled or past its deadline',
  PLANC_E705: 'unknown model',
  PLANC_E706: 'missing or wrong API key',
  PLANC_E707: 'internal server error',
  PLANC_E708: 'Redis unusable (bad URL, unreachable, wrong password)',
  PLANC_E709: 'queue job failed or not found',
  // internal: a compile step broke an invariant (a planc bug, not the model's fault)
  PLANC_E901: 'internal error: a program pass left an inconsistent program',
} as const;

export type Code = keyof typeof CODES;

/** Where a diagnostic points in the user's model. */
export interface Where {
  file?: string;
  graph?: string;
  node?: string;
  op?: string;
  stage?: string;
}

/**
 * Structured facts of an error about an option, for callers that word it their own way: the library names its option
 * (`beamSize`), and the command line words the same error with its flag (`--beam 0: it must be ...`).
 */
export interface ErrorDetail {
  /** The option at fault, by its library name (DecodingOptions' key). */
  option?: string;
  /** The value given. */
  value?: unknown;
  /** What the value must be, completing "it must be ..." (e.g. 'an integer in [1, 64]'). */
  expected?: string;
}

/**
 * Names an option inside a message: the library by the option's own name (`topk`, `stepTokens`), the command line by
 * its flag (`--topk`, `--step-tokens`; cli/option-errors.ts holds the one table).
 */
export type OptionNamer = (option: string) => string;

/** The library's wording of an option: its name as the API spells it. */
export const libraryName: OptionNamer = (option) => option;

/** A message: plain text, or text that names options through a namer (written once, worded by library or CLI). */
export type Text = string | ((opt: OptionNamer) => string);

/** Which catalog template a message came from, with its parameters (diagnostics-catalog.ts). */
export interface FromTemplate {
  readonly id: string;
  readonly params: Readonly<Record<string, unknown>>;
}

export class PlancError extends Error {
  readonly code: Code;
  readonly where: Where;
  readonly detail: ErrorDetail;
  /** The catalog template and its parameters; undefined for a free-form message. */
  readonly template: FromTemplate | undefined;
  /** The message without its code and where, its options named by `opt` (libraryName: the message as thrown). */
  readonly text: (opt: OptionNamer) => string;
  constructor(code: Code, message: Text, where: Where = {}, detail: ErrorDetail = {}, template?: FromTemplate) {
    const text = typeof message === 'string' ? () => message : message;
    super(`${code}: ${text(libraryName)}${formatWhere(where)}`);
    this.name = 'PlancError';
    this.code = code;
    this.where = where;
    this.detail = detail;
    this.template = template;
    this.text = text;
  }

  /** The same error worded with other names for its options (the command line's flags), under `code`. */
  renamed(opt: OptionNamer, code: Code = this.code): PlancError {
    const e = new PlancError(code, this.text, this.where, this.detail, this.template);
    e.message = `${code}: ${this.text(opt)}${formatWhere(this.where)}`;
    e.stack = this.stack;
    return e;
  }
}

function formatWhere(w: Where): string {
  const parts: string[] = [];
  if (w.file) parts.push(`file ${w.file}`);
  if (w.graph) parts.push(`graph ${w.graph}`);
  if (w.node !== undefined) parts.push(`node '${w.node}'${w.op ? ` (${w.op})` : ''}`);
  else if (w.op) parts.push(`op ${w.op}`);
  if (w.stage) parts.push(`during ${w.stage}`);
  return parts.length ? ` [${parts.join(', ')}]` : '';
}

/** Collects several diagnostics before failing, so one run reports every problem. */
export class Diagnostics {
  readonly errors: PlancError[] = [];
  add(e: PlancError): void {
    this.errors.push(e);
  }
  get ok(): boolean {
    return this.errors.length === 0;
  }
  /** Throws the only error, or one error listing all of them under the first one's code. */
  throwIfAny(): void {
    if (this.errors.length === 0) return;
    if (this.errors.length === 1) throw this.errors[0];
    const first = this.errors[0]!;
    throw new PlancError(
      first.code,
      `${this.errors.length} problems:\n  ${this.errors.map((e) => e.message).join('\n  ')}`,
    );
  }
}
