// A PlanProgram as readable text (what `--dump-after` prints after a program pass): kernels and their variants,
// tensors, dims, offsets.
import { PLAN_DTYPES } from '../compiler/kernel-enums.ts';
import { exprText } from '../compiler/plan/expr.ts';
import { TENSOR_KIND, type PlanProgram } from '../compiler/plan/types.ts';

const DTYPE_NAME: Record<number, string> = Object.fromEntries(PLAN_DTYPES.map((d) => [d.code, d.name]));

/** One tensor reference: index, dtype and dims, what backs it (an arena slot: its size, and its offset once placed). */
function tensorText(p: PlanProgram, i: number, placed: boolean): string {
  if (i < 0) return '_';
  const t = p.tensors[i];
  if (!t) return `%t${i}?`;
  const type = `${DTYPE_NAME[t.dtype] ?? `dtype${t.dtype}`}[${t.dims.map((d) => exprText(p, d)).join(', ')}]`;
  switch (t.kind) {
    case TENSOR_KIND.ARENA:
      return placed ? `%t${i} ${type} @${t.offset}+${t.slotBytes}` : `%t${i} ${type} slot ${t.slotBytes}`;
    case TENSOR_KIND.WEIGHT:
      return `%t${i} ${type} weight ${t.ref}`;
    case TENSOR_KIND.INPUT:
      return `%t${i} ${type} input ${t.ref}`;
    case TENSOR_KIND.STATE:
      return `%t${i} ${type} state input ${t.ref}`;
    case TENSOR_KIND.ALIAS:
      return `%t${i} ${type} = %t${t.ref}`;
    default:
      return `%t${i} ${type} kind ${t.kind}`;
  }
}

/**
 * A program as text: a header line (counts, arena), its symbols and I/O, then one line per kernel call (inputs →
 * outputs, iargs as expressions, fargs, the variant once chosen, the IR node) followed by `extra(k)` lines when given
 * (e.g. the chosen CUDA launches, each with its variant name).
 * `placed`: arena offsets are assigned (memory planned), so they are shown.
 */
export function printProgram(p: PlanProgram, placed: boolean, extra?: (kernel: number) => string[]): string {
  const text = (t: number) => tensorText(p, t, placed);
  const lines = [
    `program ${p.graph}: ${p.kernels.length} kernels, ${p.tensors.length} tensors, ${placed ? `arena ${p.arenaBytes} bytes (lower bound ${p.arenaLowerBound})` : 'arena not planned yet'}`,
    `  symbols: ${p.symbols.map((s) => `${s.name} = ${s.fromValue ? 'value' : 'dim'} ${s.axis} of input ${s.input}`).join(', ') || 'none'}`,
    ...p.inputs.map((io) => `  input ${io.name}: ${text(io.tensor)}`),
    ...p.outputs.map((io) => `  output ${io.name}: ${text(io.tensor)}`),
  ];
  p.kernels.forEach((k, i) => {
    const args = [
      k.iargs.length ? `iargs [${k.iargs.map((e) => exprText(p, e)).join(', ')}]` : '',
      k.fargs.length ? `fargs [${k.fargs.join(', ')}]` : '',
      k.variant ? `variant ${k.variant}` : '',
    ]
      .filter((x) => x)
      .join(' ');
    lines.push(`  k${i} ${k.name}(${k.inputs.map(text).join(', ')})${args ? ` ${args}` : ''}  # ${k.node}`);
    for (const o of k.outputs) lines.push(`      -> ${text(o)}`);
    for (const x of extra?.(i) ?? []) lines.push(`      ${x}`);
  });
  return lines.join('\n');
}
