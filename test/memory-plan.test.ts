// The memory planner on real graphs: every arena within 1.10x of its lower bound across profiles, fused or not.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { TENSOR_KIND, type PlanProgram } from '../compiler/plan/types.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { needsShared, skipSuite } from './helpers/skip.ts';

/** Tensors alive at the same time (other than an input handing its bytes to an output at one kernel) never share bytes. */
function assertNoOverlap(p: PlanProgram): void {
  const root = (t: number): number => (p.tensors[t]!.kind === TENSOR_KIND.ALIAS ? root(p.tensors[t]!.ref) : t);
  const span = new Map<number, [number, number]>();
  const touch = (t: number, k: number) => {
    const r = root(t);
    if (p.tensors[r]!.kind !== TENSOR_KIND.ARENA) return;
    const s = span.get(r);
    span.set(r, s ? [Math.min(s[0], k), Math.max(s[1], k)] : [k, k]);
  };
  p.kernels.forEach((k, i) => {
    k.outputs.forEach((t) => touch(t, i));
    k.inputs.forEach((t) => t >= 0 && touch(t, i));
  });
  for (const o of p.outputs) touch(o.tensor, p.kernels.length);
  const list = [...span];
  for (let i = 0; i < list.length; i++) {
    for (let j = i + 1; j < list.length; j++) {
      const [a, [a0, a1]] = list[i]!;
      const [b, [b0, b1]] = list[j]!;
      if (!(a0 <= b1 && b0 <= a1) || a1 === b0 || b1 === a0) continue;
      const ta = p.tensors[a]!;
      const tb = p.tensors[b]!;
      const disjoint =
        ta.offset + ta.slotBytes <= tb.offset ||
        tb.offset + tb.slotBytes <= ta.offset ||
        ta.slotBytes === 0 ||
        tb.slotBytes === 0;
      assert.ok(disjoint, `${p.graph}: '${ta.name}' and '${tb.name}' are alive together but share bytes`);
    }
  }
}

const shared = sharedDir();
const esen = shared && path.join(shared, 'models', 'es-en');

if (!esen || !fs.existsSync(esen)) {
  skipSuite(test, needsShared('models/es-en'), [
    ...['unfused', 'fused'].map(
      (label) => `es-en ${label}: arenas within 1.10x of the lower bound, and no two live tensors overlap`,
    ),
  ]);
} else {
  const model = importSeq2SeqDir(esen);
  const fused = runPipeline(model);
  const profiles = [
    { maxBatch: 1, maxSrcLen: 16, maxTgtLen: 16 },
    { maxBatch: 8, maxSrcLen: 64, maxTgtLen: 40, maxDims: { decoder_sequence_length: 1 } },
    { maxBatch: 32, maxSrcLen: 256, maxTgtLen: 256 },
  ];
  for (const [label, m] of [
    ['unfused', model],
    ['fused', fused],
  ] as const) {
    test(`es-en ${label}: arenas within 1.10x of the lower bound, and no two live tensors overlap`, () => {
      for (const prof of profiles) {
        const built = buildPlan(m, { target: 'cpu', ...prof });
        for (const p of built.header.programs) {
          assert.ok(
            p.arenaBytes <= 1.1 * p.arenaLowerBound,
            `${p.graph} ${JSON.stringify(prof)}: ${p.arenaBytes} vs ${p.arenaLowerBound}`,
          );
          assert.ok(p.arenaBytes >= p.arenaLowerBound);
          for (const t of p.tensors)
            if (t.kind === TENSOR_KIND.ARENA)
              assert.ok(t.offset % 64 === 0 && t.offset + t.slotBytes <= p.arenaBytes, `${p.graph} ${t.name}`);
          assertNoOverlap(p);
        }
      }
    });
  }
}

test.run();
