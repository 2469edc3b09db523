// The IR verifier: dangling values, double definitions, cycles and order, undefined outputs, and types vs inference.
import { Diagnostics, PlancError } from '../compiler/diagnostics.ts';
import type { Graph, Model } from '../compiler/ir.ts';
import { inferGraph } from './infer/infer.ts';
import { typeStr } from './printer.ts';
import { dimEq, isSym } from '../compiler/symbolic.ts';

export interface VerifyOptions {
  /** The pass that produced the model, named in every error. */
  pass?: string;
  /** The file the model came from, named in every error. */
  file?: string;
  /** Also re-infer types and compare them with the annotated ones (default true). */
  types?: boolean;
}

/** Throws one PlancError listing every problem found in the model. */
export function verifyModel(model: Model, opts: VerifyOptions = {}): void {
  const diags = new Diagnostics();
  for (const g of model.graphs.values())
    verifyGraph(g, diags, opts.pass, new Set(), opts.file ?? model.sources[g.name]);
  if (diags.ok && opts.types !== false) for (const g of model.graphs.values()) verifyTypes(model, g, diags, opts.pass);
  diags.throwIfAny();
}

function verifyGraph(g: Graph, diags: Diagnostics, pass: string | undefined, outer: Set<string>, file?: string): void {
  const stage = pass ? `verify after ${pass}` : 'verify';
  const defined = new Set<string>([...outer, ...g.inputs, ...g.initializers.keys()]);
  const producer = new Map<string, string>();
  for (const n of g.nodes)
    for (const o of n.outputs)
      if (o) {
        if (producer.has(o) || g.inputs.includes(o) || g.initializers.has(o)) {
          diags.add(
            new PlancError(
              'PLANC_E103',
              `value '${o}' is defined more than once (also by ${producer.get(o) ?? 'a graph input or initializer'})`,
              { file, graph: g.name, node: n.name, op: n.op, stage },
            ),
          );
        }
        producer.set(o, n.name);
      }
  const late: string[] = [];
  for (const n of g.nodes) {
    n.inputs.forEach((x, i) => {
      if (!x || defined.has(x)) return;
      if (producer.has(x)) late.push(`${n.name} reads '${x}' before ${producer.get(x)} defines it`);
      else
        diags.add(
          new PlancError('PLANC_E102', `input ${i} '${x}' is never defined`, {
            file,
            graph: g.name,
            node: n.name,
            op: n.op,
            stage,
          }),
        );
    });
    for (const a of Object.values(n.attrs)) {
      if (a.kind === 'graph') verifyGraph(a.value, diags, pass, defined, file);
      if (a.kind === 'graphs') for (const sg of a.value) verifyGraph(sg, diags, pass, defined, file);
    }
    for (const o of n.outputs) if (o) defined.add(o);
  }
  if (late.length) {
    const cycle = findCycle(g);
    if (cycle)
      diags.add(
        new PlancError('PLANC_E101', `graph has a cycle: ${cycle.join(' -> ')}`, {
          file,
          graph: g.name,
          node: cycle[0],
          stage,
        }),
      );
    else
      diags.add(
        new PlancError('PLANC_E101', `nodes are not in topological order: ${late.slice(0, 3).join('; ')}`, {
          file,
          graph: g.name,
          stage,
        }),
      );
  }
  for (const o of g.outputs) {
    if (!defined.has(o))
      diags.add(
        new PlancError('PLANC_E106', `graph output '${o}' is never defined`, { file, graph: g.name, node: o, stage }),
      );
  }
}

/** A cycle of node names, or undefined when the graph is acyclic. */
export function findCycle(g: Graph): string[] | undefined {
  const producer = new Map<string, number>();
  g.nodes.forEach((n, i) => n.outputs.forEach((o) => o && producer.set(o, i)));
  const state = new Uint8Array(g.nodes.length); // 0 new, 1 on stack, 2 done
  const stack: number[] = [];
  const visit = (i: number): string[] | undefined => {
    state[i] = 1;
    stack.push(i);
    for (const x of g.nodes[i]!.inputs) {
      const p = x ? producer.get(x) : undefined;
      if (p === undefined) continue;
      if (state[p] === 1) return [...stack.slice(stack.indexOf(p)), p].map((k) => g.nodes[k]!.name);
      if (state[p] === 0) {
        const c = visit(p);
        if (c) return c;
      }
    }
    stack.pop();
    state[i] = 2;
    return undefined;
  };
  for (let i = 0; i < g.nodes.length; i++)
    if (state[i] === 0) {
      const c = visit(i);
      if (c) return c;
    }
  return undefined;
}

/** Orders nodes so every value is defined before use (stable); throws PLANC_E101 naming a cycle. */
export function sortTopologically(g: Graph, file?: string): void {
  const cycle = findCycle(g);
  if (cycle)
    throw new PlancError('PLANC_E101', `graph has a cycle: ${cycle.join(' -> ')}`, {
      file,
      graph: g.name,
      node: cycle[0],
    });
  const producer = new Map<string, number>();
  g.nodes.forEach((n, i) => n.outputs.forEach((o) => o && producer.set(o, i)));
  const done = new Uint8Array(g.nodes.length);
  const order: number[] = [];
  const visit = (i: number) => {
    if (done[i]) return;
    done[i] = 1;
    for (const x of g.nodes[i]!.inputs) {
      const p = x ? producer.get(x) : undefined;
      if (p !== undefined) visit(p);
    }
    order.push(i);
  };
  for (let i = 0; i < g.nodes.length; i++) visit(i);
  if (order.some((k, i) => k !== i)) g.nodes = order.map((k) => g.nodes[k]!);
}

/** Re-infers a graph and reports values whose annotated type disagrees with what their producer computes. */
function verifyTypes(model: Model, g: Graph, diags: Diagnostics, pass?: string): void {
  const stage = pass ? `verify after ${pass}` : 'verify';
  const local = new Diagnostics();
  const facts = inferGraph(model, g, { annotate: false }, local);
  for (const e of local.errors) diags.add(e);
  for (const n of g.nodes)
    for (const o of n.outputs) {
      const have = g.values.get(o)?.type;
      const got = facts.get(o);
      if (!o || !have || !got) continue;
      const inTypes = n.inputs.map((x) => (x ? typeStr(g.values.get(x)?.type) : '_')).join(', ');
      if (have.dtype !== got.dtype) {
        diags.add(
          new PlancError(
            'PLANC_E104',
            `'${o}' is annotated ${typeStr(have)} but ${n.op}(${inTypes}) gives ${typeStr(got)}`,
            { graph: g.name, node: n.name, op: n.op, stage },
          ),
        );
      } else if (
        have.shape &&
        got.shape &&
        (have.shape.length !== got.shape.length ||
          have.shape.some((d, i) => !isSym(d) && !isSym(got.shape![i]!) && !dimEq(d, got.shape![i]!)))
      ) {
        diags.add(
          new PlancError(
            'PLANC_E105',
            `'${o}' is annotated ${typeStr(have)} but ${n.op}(${inTypes}) gives ${typeStr(got)}`,
            { graph: g.name, node: n.name, op: n.op, stage },
          ),
        );
      }
    }
}
