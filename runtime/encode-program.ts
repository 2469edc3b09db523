// Encodes a validated PlanProgram into the int64 code words the native executor decodes (native/PROGRAM.md).
import { PlancError } from '../compiler/diagnostics.ts';
import { variantCode } from '../compiler/kernel-schema.ts';
import type { PlanProgram } from '../compiler/plan/types.ts';

export const PROGRAM_MAGIC = 0x31474f5250434c50n; // "PLCPROG1"

/** kernelIds: the native kernel table's name → id. Fails naming the kernel when this build lacks it. */
export function encodeProgram(
  p: PlanProgram,
  nWeights: number,
  kernelIds: ReadonlyMap<string, number>,
  file?: string,
): BigInt64Array {
  const w: (number | bigint)[] = [
    PROGRAM_MAGIC,
    p.symbols.length,
    p.exprs.length,
    p.tensors.length,
    p.kernels.length,
    p.inputs.length,
    p.outputs.length,
    p.arenaBytes,
    nWeights,
    0,
  ];
  for (const e of p.exprs) {
    w.push(e.terms.length);
    for (const t of e.terms) w.push(t.coeff, t.factors.length, ...t.factors);
  }
  for (const t of p.tensors) {
    const [a, b] = t.kind === 0 ? [t.offset, t.slotBytes] : [t.ref, 0];
    w.push(t.kind, t.dtype, t.dims.length, a, b, ...t.dims);
  }
  p.kernels.forEach((k, i) => {
    const id = kernelIds.get(k.name);
    if (id === undefined) {
      throw new PlancError(
        'PLANC_E403',
        `program '${p.graph}' kernel ${i} needs '${k.name}', which this build of the native runtime does not have (node ${k.node}); rebuild with npm run build:native or re-optimize`,
        { file, graph: p.graph, node: k.node },
      );
    }
    const variant = variantCode(k.name, k.variant ?? '');
    if (variant === undefined) {
      throw new PlancError(
        'PLANC_E403',
        `program '${p.graph}' kernel ${i} (${k.name}) names variant '${k.variant}', which this planc's kernel schema does not have (node ${k.node}); re-optimize`,
        { file, graph: p.graph, node: k.node },
      );
    }
    w.push(
      id,
      variant,
      k.inputs.length,
      k.outputs.length,
      k.iargs.length,
      k.fargs.length,
      ...k.inputs,
      ...k.outputs,
      ...k.iargs,
    );
    const f = new Float64Array(k.fargs);
    w.push(...new BigInt64Array(f.buffer));
  });
  for (const io of p.inputs) w.push(io.tensor);
  for (const io of p.outputs) w.push(io.tensor);
  return BigInt64Array.from(w, (x) => BigInt(x));
}
