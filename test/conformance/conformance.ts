// Runs ONNX backend conformance tests through import → inference → evaluator and classifies each result.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Diagnostics, PlancError } from '../../compiler/diagnostics.ts';
import { isFloat } from '../../compiler/dtype.ts';
import { evaluate } from '../../model/eval/evaluate.ts';
import { inferGraph } from '../../model/infer/infer.ts';
import type { Model } from '../../compiler/ir.ts';
import { importOnnxFile, unsupportedOps } from '../../model/onnx/import-model.ts';
import { onnx } from '../../model/onnx/proto.ts';
import { tensorFromProto } from '../../model/onnx/tensor-proto.ts';
import { dimEval, dimStr, isSym, type Dim } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import { runNative } from './native-backend.ts';
import { runPipeline } from '../../passes/pipeline.ts';

export type Status = 'passed' | 'failed' | 'crashed' | 'skipped';

export interface TestResult {
  name: string;
  status: Status;
  /** Why it failed or was skipped. */
  reason?: string;
  /** Ops (or dtypes) that made it skip. */
  missing?: string[];
  ms: number;
}

const RTOL = 1e-3;
const ATOL = 1e-7;

/** Runs one test folder (model.onnx + test_data_set_N). */
export type Backend = 'eval' | 'native';

/** Errors that mean "the CPU backend cannot run this model yet" rather than a wrong answer. */
function backendUnsupported(e: unknown): boolean {
  return e instanceof PlancError && (e.code === 'PLANC_E404' || e.code === 'PLANC_E403');
}

export function runTest(dir: string, backend: Backend = 'eval', passes = false): TestResult {
  const name = path.basename(dir);
  const t0 = performance.now();
  const done = (status: Status, reason?: string, missing?: string[]): TestResult => ({
    name,
    status,
    reason,
    missing,
    ms: performance.now() - t0,
  });
  let model: Model;
  try {
    model = importOnnxFile(path.join(dir, 'model.onnx'), { allowUnsupported: true });
  } catch (e) {
    if (e instanceof PlancError && e.code === 'PLANC_E004')
      return done('skipped', firstLine(e.message), [dtypeWord(e.message)]);
    return classify(e, done);
  }
  const missing = unsupportedOps(model);
  if (missing.size > 0)
    return done('skipped', `unsupported ops: ${[...missing.keys()].join(', ')}`, [...missing.keys()]);
  try {
    if (passes) model = runPipeline(model);
    const graph = model.graphs.get('main')!;
    const diags = new Diagnostics();
    const facts = inferGraph(model, graph, { annotate: true }, diags);
    diags.throwIfAny();
    const sets = fs
      .readdirSync(dir)
      .filter((d) => d.startsWith('test_data_set_'))
      .sort();
    if (sets.length === 0) return done('skipped', 'no test data');
    const checked: { feeds: Record<string, Tensor>; outputs: Tensor[] }[] = [];
    for (const set of sets) {
      const data = loadSet(path.join(dir, set));
      if (typeof data === 'string') return done('skipped', data, ['sequence/optional data']);
      const feeds: Record<string, Tensor> = {};
      graph.inputs.slice(0, data.inputs.length).forEach((n, i) => (feeds[n] = data.inputs[i]!));
      const bind = bindSymbols(
        graph.inputs.map((n) => facts.get(n)?.shape),
        graph.inputs.map((n) => feeds[n]),
      );
      graph.outputs.forEach((o, i) => {
        const want = data.outputs[i];
        if (!want) return;
        const f = facts.get(o);
        if (!f) throw new Mismatch(`no inferred type for output '${o}'`);
        checkInferred(o, f.dtype, f.shape, want, bind);
      });
      const got = evaluate(model, 'main', feeds);
      graph.outputs.forEach((o, i) => {
        const want = data.outputs[i];
        if (want) compare(o, got[o]!, want);
      });
      checked.push({ feeds, outputs: data.outputs });
    }
    if (backend === 'native') {
      let results: Record<string, Tensor>[];
      try {
        results = runNative(
          model,
          checked.map((c) => c.feeds),
        );
      } catch (e) {
        if (backendUnsupported(e))
          return done('skipped', `cpu backend: ${firstLine((e as Error).message)}`, ['cpu backend']);
        throw e;
      }
      results.forEach((got, k) =>
        graph.outputs.forEach((o, i) => {
          const want = checked[k]!.outputs[i];
          if (want) compare(`${o} (native)`, got[o]!, want);
        }),
      );
    }
    return done('passed');
  } catch (e) {
    return classify(e, done);
  }
}

class Mismatch extends Error {}

function classify(e: unknown, done: (s: Status, r?: string) => TestResult): TestResult {
  if (e instanceof Mismatch) return done('failed', e.message);
  if (e instanceof PlancError && !(e as { internal?: boolean }).internal) return done('failed', firstLine(e.message));
  return done(
    'crashed',
    `${(e as Error).message?.split('\n')[0]} @ ${((e as Error).stack ?? '').split('\n').slice(1, 3).join(' ').trim()}`,
  );
}

function firstLine(s: string): string {
  return s.split('\n').slice(0, 3).join(' | ');
}

function dtypeWord(msg: string): string {
  const m = /dtype (\w+)|is a (sequence|map|optional)/.exec(msg);
  return m ? (m[1] ?? m[2]!) : 'dtype';
}

function loadSet(dir: string): { inputs: Tensor[]; outputs: Tensor[] } | string {
  const read = (prefix: string) => {
    const files = fs
      .readdirSync(dir)
      .filter((f) => f.startsWith(prefix) && f.endsWith('.pb'))
      .sort((a, b) => Number(a.slice(prefix.length, -3)) - Number(b.slice(prefix.length, -3)));
    return files.map((f) => {
      const p = path.join(dir, f);
      const tp = onnx.TensorProto.decode(fs.readFileSync(p));
      if (!tp.dataType) return undefined;
      return tensorFromProto(tp, { file: p });
    });
  };
  const inputs = read('input_');
  const outputs = read('output_');
  if (inputs.some((t) => !t) || outputs.some((t) => !t)) return 'sequence or optional test data';
  return { inputs: inputs as Tensor[], outputs: outputs as Tensor[] };
}

/** Binds plain symbols of the inferred input shapes to the fed dims. */
function bindSymbols(shapes: (Dim[] | undefined)[], feeds: (Tensor | undefined)[]): Map<string, number> {
  const bind = new Map<string, number>();
  shapes.forEach((s, i) =>
    s?.forEach((d, k) => {
      const t = feeds[i];
      if (t && isSym(d) && d.terms.size === 1 && d.terms.values().next().value === 1) bind.set(d.key, t.dims[k]!);
    }),
  );
  return bind;
}

function checkInferred(
  name: string,
  dtype: string,
  shape: Dim[] | undefined,
  want: Tensor,
  bind: Map<string, number>,
): void {
  if (dtype !== want.dtype) throw new Mismatch(`inferred dtype ${dtype} for '${name}', expected ${want.dtype}`);
  if (!shape) return;
  if (shape.length !== want.rank)
    throw new Mismatch(
      `inferred rank ${shape.length} ([${shape.map(dimStr)}]) for '${name}', expected dims [${want.dims}]`,
    );
  shape.forEach((d, k) => {
    const v = dimEval(d, bind);
    if (v !== undefined && v !== want.dims[k])
      throw new Mismatch(`inferred shape [${shape.map(dimStr)}] for '${name}', expected [${want.dims}]`);
  });
}

function compare(name: string, got: Tensor, want: Tensor): void {
  if (got.dtype !== want.dtype) throw new Mismatch(`output '${name}' has dtype ${got.dtype}, expected ${want.dtype}`);
  if (got.dims.length !== want.dims.length || got.dims.some((d, i) => d !== want.dims[i])) {
    throw new Mismatch(`output '${name}' has dims [${got.dims}], expected [${want.dims}]`);
  }
  if (want.dtype === 'string') {
    const i = want.strings.findIndex((s, k) => s !== got.strings[k]);
    if (i >= 0) throw new Mismatch(`output '${name}'[${i}] is '${got.strings[i]}', expected '${want.strings[i]}'`);
    return;
  }
  const a = got.nums;
  const b = want.nums;
  const float = isFloat(want.dtype);
  for (let i = 0; i < b.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (Number.isNaN(y) || Number.isNaN(x)) {
      if (Number.isNaN(x) && Number.isNaN(y)) continue;
      throw new Mismatch(`output '${name}'[${i}] is ${x}, expected ${y}`);
    }
    if (x === y) continue;
    if (float && Math.abs(x - y) <= ATOL + RTOL * Math.abs(y)) continue;
    throw new Mismatch(
      `output '${name}'[${i}] is ${x}, expected ${y}${float ? ` (|diff| ${Math.abs(x - y).toExponential(2)})` : ''}`,
    );
  }
}

/** Test folders of a suite folder, sorted. */
export function listTests(suite: string): string[] {
  return fs
    .readdirSync(suite)
    .filter((d) => fs.existsSync(path.join(suite, d, 'model.onnx')))
    .sort()
    .map((d) => path.join(suite, d));
}
