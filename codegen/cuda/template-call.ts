// A CUDA kernel template's instantiation text (`planc::attention<64, 0, 1, true>`) from its arguments by parameter
// name, in the order compiler/kernel-schema.ts CUDA_TEMPLATES declares; a wrong or missing name is an error.
import { CUDA_TEMPLATES, type CudaTemplateName } from '../../compiler/kernel-schema.ts';

interface Param {
  name: string;
  kind: 'int' | 'bool' | 'class';
  optional: boolean;
}

/** A template argument: an int, a bool, or a C++ type / functor name (class parameters). */
export type TemplateArg = number | boolean | string;

const parsed = new Map<CudaTemplateName, Param[]>();

function paramsOf(name: CudaTemplateName): Param[] {
  let ps = parsed.get(name);
  if (ps) return ps;
  ps = CUDA_TEMPLATES[name].split(',').map((text) => {
    const m = /^\s*(int|bool|class)\s+(\w+)\s*(=.*)?$/.exec(text);
    if (!m) throw new Error(`internal: CUDA_TEMPLATES.${name}: cannot read the parameter '${text.trim()}'`);
    return { kind: m[1] as Param['kind'], name: m[2]!, optional: m[3] !== undefined };
  });
  parsed.set(name, ps);
  return ps;
}

/**
 * `planc::NAME<...>` with args by parameter name. Parameters left out must be trailing ones with a C++ default (the
 * instantiation leaves them off); every given name must be declared and of its kind.
 */
export function cudaTemplate(name: CudaTemplateName, args: Readonly<Record<string, TemplateArg | undefined>>): string {
  const ps = paramsOf(name);
  const bad = (msg: string): never => {
    throw new Error(`internal: CUDA template ${name}<${CUDA_TEMPLATES[name]}>: ${msg}`);
  };
  for (const k of Object.keys(args))
    if (args[k] !== undefined && !ps.some((p) => p.name === k)) bad(`no parameter '${k}'`);
  const given = ps.map((p) => args[p.name]);
  let n = given.length;
  while (n > 0 && given[n - 1] === undefined) n--;
  const text = ps.slice(0, n).map((p, i) => {
    const v = given[i];
    if (v === undefined) return bad(`'${p.name}' is left out but '${ps[n - 1]!.name}' after it is given`);
    if (p.kind === 'int' && !Number.isInteger(v)) bad(`'${p.name}' wants an int, got ${String(v)}`);
    if (p.kind === 'bool' && typeof v !== 'boolean') bad(`'${p.name}' wants a bool, got ${String(v)}`);
    if (p.kind === 'class' && typeof v !== 'string') bad(`'${p.name}' wants a type, got ${String(v)}`);
    return String(v);
  });
  for (const p of ps.slice(n)) if (!p.optional) bad(`'${p.name}' is missing (it has no default)`);
  return `planc::${name}<${text.join(', ')}>`;
}
