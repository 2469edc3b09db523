// The check after every program pass: references in range, arena slots inside the arena, kernels and their CUDA launch
// variants as the schema declares them, packed weights.
import { PlancError } from '../compiler/diagnostics.ts';
import { arity, cudaVariants, KERNELS, type Arity, type KernelSpec } from '../compiler/kernel-schema.ts';
import { TENSOR_KIND, type PlanProgram } from '../compiler/plan/types.ts';
import type { ProgramState } from './program-state.ts';

/** At most this many problems are listed per program. */
const MAX_LISTED = 8;

const ARITY = new Map<string, Arity | undefined>();

/** A kernel's operand and argument counts from the schema; undefined for a name it does not declare (or test-only). */
function arityOf(name: string): Arity | undefined {
  if (!ARITY.has(name)) {
    const spec = Object.hasOwn(KERNELS, name) ? (KERNELS as Record<string, KernelSpec>)[name] : undefined;
    ARITY.set(name, spec && !spec.testOnly ? arity(spec) : undefined);
  }
  return ARITY.get(name);
}

/** What is wrong with program i of the state (empty: nothing). */
function programProblems(s: ProgramState, i: number): string[] {
  const p = s.programs[i]!;
  const out: string[] = [];
  const ref = (what: string, t: number) => {
    if (!Number.isInteger(t) || t < 0 || t >= p.tensors.length)
      out.push(`${what} refers to tensor ${t} of ${p.tensors.length}`);
  };
  const expr = (what: string, e: number) => {
    if (!Number.isInteger(e) || e < 0 || e >= p.exprs.length)
      out.push(`${what} uses expression ${e} of ${p.exprs.length}`);
  };
  p.symbols.forEach((x, k) => {
    if (x.input < 0 || x.input >= p.inputs.length)
      out.push(`symbol ${k} (${x.name}) reads input ${x.input} of ${p.inputs.length}`);
  });
  p.exprs.forEach((e, k) =>
    e.terms.forEach((t) =>
      t.factors.forEach((f) => {
        if (f < 0 || f >= p.symbols.length) out.push(`expression ${k} uses symbol ${f} of ${p.symbols.length}`);
      }),
    ),
  );
  p.tensors.forEach((t, k) => {
    const what = `tensor ${k} ('${t.name}')`;
    t.dims.forEach((d) => expr(what, d));
    switch (t.kind) {
      case TENSOR_KIND.ARENA:
        if (!Number.isSafeInteger(t.slotBytes) || t.slotBytes < 0) out.push(`${what} has slot size ${t.slotBytes}`);
        if (s.memoryPlanned && (t.offset < 0 || t.offset + t.slotBytes > p.arenaBytes))
          out.push(`${what} slot ${t.offset}+${t.slotBytes} is outside the arena (${p.arenaBytes} bytes)`);
        break;
      case TENSOR_KIND.WEIGHT:
        if (t.ref < 0 || t.ref >= s.weights.list.length)
          out.push(`${what} refers to weight ${t.ref} of ${s.weights.list.length}`);
        break;
      case TENSOR_KIND.INPUT:
      case TENSOR_KIND.STATE:
        if (t.ref < 0 || t.ref >= p.inputs.length) out.push(`${what} refers to input ${t.ref} of ${p.inputs.length}`);
        break;
      case TENSOR_KIND.ALIAS:
        if (t.ref < 0 || t.ref >= k) out.push(`${what} aliases tensor ${t.ref}, which does not come before it`);
        break;
      default:
        out.push(`${what} has unknown kind ${t.kind}`);
    }
  });
  p.kernels.forEach((kern, k) => {
    const what = `kernel ${k} (${kern.name}, node '${kern.node}')`;
    const a = arityOf(kern.name);
    if (!a) out.push(`${what} is not a kernel of compiler/kernel-schema.ts`);
    const count = (of: string, n: number, min = 0, max = Infinity) => {
      if (n < min || n > max) out.push(`${what} has ${n} ${of}, the schema says ${min}..${max}`);
    };
    if (a) {
      count('inputs', kern.inputs.length, a.minIn, a.maxIn);
      count('outputs', kern.outputs.length, a.minOut, a.maxOut);
      count('iargs', kern.iargs.length, a.minIargs, a.maxIargs);
      count('fargs', kern.fargs.length, a.minFargs, a.maxFargs);
    }
    kern.inputs.forEach((t) => {
      if (t !== -1) ref(what, t);
    });
    kern.outputs.forEach((t) => ref(what, t));
    kern.iargs.forEach((e) => expr(what, e));
  });
  p.inputs.forEach((io) => ref(`input '${io.name}'`, io.tensor));
  p.outputs.forEach((io) => ref(`output '${io.name}'`, io.tensor));
  const calls = (what: string, n: number | undefined) => {
    if (n !== p.kernels.length) out.push(`${what} for ${n ?? 'no'} kernel calls of ${p.kernels.length}`);
  };
  if (s.variants) {
    calls('launch variants chosen', s.variants[i]?.length);
    s.variants[i]?.forEach((v, k) => {
      const kern = p.kernels[k];
      if (v.length === 0) out.push(`kernel ${k} (${kern?.name}) has no launch variant`);
      if (!kern || !arityOf(kern.name)) return;
      const declared = cudaVariants(kern.name).map((d) => d.name);
      for (const inst of v) {
        if (!declared.includes(inst.variant))
          out.push(
            `kernel ${k} (${kern.name}, node '${kern.node}') launches CUDA variant '${inst.variant}', which compiler/kernel-schema.ts does not declare for it (${declared.join(', ')})`,
          );
      }
    });
  }
  if (s.cuda) calls('CUDA launches built', s.cuda.cuda.programs[i]?.calls.length);
  if (s.header && s.header.arena.bytes < p.arenaBytes)
    out.push(`needs ${p.arenaBytes} arena bytes but the plan's arena has ${s.header.arena.bytes}`);
  return out;
}

/** What is wrong with the state as a whole: program counts of the later steps, the packed weights. */
function stateProblems(s: ProgramState): string[] {
  const out: string[] = [];
  const n = s.programs.length;
  if (s.variants && s.variants.length !== n)
    out.push(`launch variants chosen for ${s.variants.length} programs of ${n}`);
  if (s.cuda && s.cuda.cuda.programs.length !== n)
    out.push(`CUDA launches built for ${s.cuda.cuda.programs.length} programs of ${n}`);
  if (s.header && s.blob) {
    const ws = s.header.weights;
    if (ws.length !== s.weights.list.length) out.push(`${ws.length} weights packed of ${s.weights.list.length}`);
    ws.forEach((w, k) => {
      if (w.offset < 0 || w.offset + w.length > s.blob!.length)
        out.push(`weight ${k} (${w.id}) at ${w.offset}+${w.length} is outside the blob (${s.blob!.length} bytes)`);
    });
  }
  return out;
}

const listed = (problems: string[]) =>
  problems.slice(0, MAX_LISTED).join('; ') +
  (problems.length > MAX_LISTED ? `; and ${problems.length - MAX_LISTED} more` : '');

/** Throws an internal PlancError (PLANC_E901) naming the pass and the program when the state is inconsistent after `pass`. */
export function verifyProgramState(s: ProgramState, pass: string): void {
  s.programs.forEach((p: PlanProgram, i) => {
    const problems = programProblems(s, i);
    if (problems.length) {
      throw new PlancError('PLANC_E901', `after program pass ${pass}, program ${p.graph}: ${listed(problems)}`, {
        graph: p.graph,
        stage: `verify after ${pass}`,
      });
    }
  });
  const problems = stateProblems(s);
  if (problems.length)
    throw new PlancError('PLANC_E901', `after program pass ${pass}: ${listed(problems)}`, {
      stage: `verify after ${pass}`,
    });
}
