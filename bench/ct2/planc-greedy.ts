// Writes the float32 plan's greedy ids for the first N test sentences of es-en (the reference bench/ct2/check_marian.py compares with).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildPlan } from '../../codegen/build-plan.ts';
import { encodePlan } from '../../compiler/plan/format.ts';
import { importSeq2SeqDir } from '../../model/onnx/import-model.ts';
import { runPipeline, TRANSLATE_TOPK } from '../../passes/pipeline.ts';
import { translateIds } from '../../runtime/decode/translate-ids.ts';
import { loadPlanBytes } from '../../runtime/plan.ts';

// node --import tsx bench/ct2/planc-greedy.ts ES_EN_DIR N BATCH OUT.json (max length 64, as bench translate)
const [dir, n, batch, out] = process.argv.slice(2);
if (!dir || !n || !batch || !out) {
  console.error('usage: node --import tsx bench/ct2/planc-greedy.ts ES_EN_DIR N BATCH OUT.json');
  process.exit(2);
}
const ids: number[][] = JSON.parse(fs.readFileSync(path.join(dir, 'test_ids.json'), 'utf8')).src_ids.slice(
  0,
  Number(n),
);
const built = buildPlan(runPipeline(importSeq2SeqDir(dir), { topk: TRANSLATE_TOPK }), {
  target: 'cpu',
  maxBatch: 32,
  maxSrcLen: Math.max(128, ...ids.map((s) => s.length)),
  maxTgtLen: 64,
  maxDims: { decoder_sequence_length: 1 },
});
const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'es-en-fp32.plan');
try {
  const res = await translateIds(plan, ids, { batchSize: Number(batch), maxLength: 64 });
  fs.writeFileSync(out, JSON.stringify({ batch: Number(batch), maxLength: 64, ids: res.map((r) => r.ids) }));
  console.log(`wrote ${res.length} translations to ${out}`);
} finally {
  plan.close();
}
