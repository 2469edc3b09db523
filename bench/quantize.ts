// `npm run bench -- quantize [MODES]`: the accuracy of quantized es-en plans against the float32 plan on all 1,000
// test sentences (identical greedy output, teacher-forced top-1 agreement, BLEU of both), through the same quantize
// step `planc optimize --quantize MODE --eval-src --eval-ref` runs; appended to bench/results/quantize.jsonl.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import type { QuantizeRequest } from '../passes/pass.ts';
import { TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { quantizeStep } from '../optimize/quantize-step.ts';
import { machineFacts } from './machine.ts';
import { esenDir } from './shared-models.ts';

const MAX_LEN = 64;

export async function benchQuantize(): Promise<void> {
  const dir = esenDir('quantize');
  if (!dir) return;
  const modes = (process.argv[3] ?? 'int8,w8,int16').split(',') as QuantizeRequest['mode'][];
  const model = importSeq2SeqDir(dir);
  const tokenizer = { bytes: fs.readFileSync(path.join(dir, 'vocab.esen.spm')), kind: 'spm' as const };
  const profile = { maxBatch: 32, maxSrcLen: 256, maxTgtLen: MAX_LEN, maxDims: { decoder_sequence_length: 1 } };
  const rows = [];
  for (const mode of modes) {
    const t0 = performance.now();
    const r = await quantizeStep(
      model,
      { mode, evalSrc: path.join(dir, 'test.es'), evalRef: path.join(dir, 'test.en') },
      { topk: TRANSLATE_TOPK },
      { profile, tokenizer },
    );
    const h = r.header;
    const row = {
      mode,
      seconds: (performance.now() - t0) / 1000,
      sentences: h.evalSentences,
      identical: h.identicalSentences,
      top1: h.top1Agreement,
      bleu: h.bleu,
      bleuFp32: h.bleuFp32,
      gatePassed: h.gatePassed,
      raised: Object.entries(r.options.layers ?? {}).filter(([, p]) => p !== 'int8').length,
      notes: h.notes,
    };
    rows.push(row);
    console.log(
      `${mode.padEnd(5)} ${h.evalSentences} sentences: identical ${(100 * h.identicalSentences).toFixed(1)}%, top-1 ${(100 * h.top1Agreement).toFixed(2)}%, BLEU ${h.bleu.toFixed(2)} vs float32 ${h.bleuFp32.toFixed(2)}; gate (${h.gate}) ${h.gatePassed ? 'holds' : 'FAILS'}${row.raised ? `; ${row.raised} layer(s) above int8` : ''} (${row.seconds.toFixed(0)} s)`,
    );
    for (const n of h.notes.split('\n').filter((x) => x)) console.log(`    ${n}`);
  }
  const out = path.join(REPO_ROOT, 'bench', 'results', 'quantize.jsonl');
  fs.appendFileSync(
    out,
    JSON.stringify({ bench: 'quantize', model: 'es-en', maxLength: MAX_LEN, rows, ...machineFacts() }) + '\n',
  );
  console.log(`appended to ${path.relative(process.cwd(), out)}`);
}
