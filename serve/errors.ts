// How planc serve answers errors: a PLANC code, an HTTP status and a message without stack traces or file paths.
import { PlancError, type Code } from '../compiler/diagnostics.ts';

/** The HTTP status of an error code (a request's whole answer; a sentence's error rides in a 200). */
export function statusOf(code: string): number {
  switch (code) {
    case 'PLANC_E702':
      return 429;
    case 'PLANC_E703':
      return 413;
    case 'PLANC_E704':
      return 504;
    case 'PLANC_E705':
      return 404;
    case 'PLANC_E706':
      return 401;
    case 'PLANC_E707':
    case 'PLANC_E412': // a plan closed under a request: the server's state, not the request's fault
      return 500;
    case 'PLANC_E708':
      return 503;
    case 'PLANC_E709':
      return 502;
    default:
      return code.startsWith('PLANC_E') ? 400 : 500;
  }
}

interface AjvError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: { additionalProperty?: string };
}

/** Schema errors in words: the field (body.options.beam), what is wrong; an unknown field by its name. */
function validationText(errors: AjvError[]): string {
  const where = (e: AjvError) => `body${(e.instancePath ?? '').replace(/\//g, '.')}`;
  const extra = errors.find((e) => e.keyword === 'additionalProperties');
  if (extra) return `unknown field '${extra.params?.additionalProperty}' in ${where(extra)} (see /openapi.json)`;
  const text = errors.find((e) => where(e) === 'body.text');
  if (text) return 'body.text must be a string or an array of strings';
  return errors.map((e) => `${where(e)} ${e.message ?? 'is invalid'}`).join('; ');
}

/** Any thrown value as a PlancError; what is not one is an internal error (its text is logged, never answered). */
export function requestError(e: unknown): PlancError {
  if (e instanceof PlancError) return e;
  const f = e as { statusCode?: number; code?: string; validation?: unknown; message?: string };
  if (Array.isArray(f?.validation))
    return new PlancError('PLANC_E701', `bad request: ${validationText(f.validation as AjvError[])}`);
  if (f?.statusCode === 413)
    return new PlancError(
      'PLANC_E703',
      (opt) => `the request body is over this server's limit (${opt('maxBodyBytes')}): ${f.message ?? ''}`,
    );
  if (f?.statusCode === 415)
    return new PlancError(
      'PLANC_E701',
      `bad request: ${f.message ?? 'unsupported content type'}; send application/json`,
    );
  if (f?.statusCode !== undefined && f.statusCode >= 400 && f.statusCode < 500)
    return new PlancError('PLANC_E701', `bad request: ${f.message ?? f.code ?? 'malformed'}`);
  return new PlancError('PLANC_E707', "internal server error (logged with this request's id)");
}

/** The message a client sees: the plan's file path becomes the model's name, other absolute paths are cut. */
export function publicMessage(e: Error, model?: { name: string; plan: { source: string } }): string {
  let msg =
    e instanceof PlancError
      ? e.message.replace(/^PLANC_E\d+: /, '')
      : "internal server error (logged with this request's id)";
  if (model) msg = msg.split(model.plan.source).join(`model '${model.name}'`);
  return msg.replace(/ \[file [^\]]*\]/g, '').replace(/(^|[\s'"(=])\/(?:[\w.@+-]+\/)*[\w.@+-]+/g, '$1<path>');
}

export function errorBody(
  e: PlancError,
  model?: { name: string; plan: { source: string } },
): { error: { code: Code | string; message: string } } {
  return { error: { code: e.code, message: publicMessage(e, model) } };
}
