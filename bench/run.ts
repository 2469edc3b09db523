// `npm run bench -- NAME`: runs one benchmark (cpu, cuda, hrt, jacobi, lookup, onednn, qgemm, quantize, quantize-bits, queue, serve, share-rows, translate, tune, vocab, vocab-curve, vocab-large, zoo) and records it under bench/results/.
import { benchCpu } from './cpu.ts';
import { benchCuda } from './cuda.ts';
import { benchHrt } from './hrt.ts';
import { benchJacobi } from './jacobi.ts';
import { benchLookup } from './lookup.ts';
import { benchOnednn } from './onednn.ts';
import { benchQgemm } from './qgemm.ts';
import { benchQuantize } from './quantize.ts';
import { benchQuantizeBits } from './quantize-bits.ts';
import { benchQueue } from './queue.ts';
import { benchServe } from './serve.ts';
import { benchShareRows } from './share-rows.ts';
import { benchTranslate } from './translate.ts';
import { benchTune } from './tune.ts';
import { benchVocab } from './vocab.ts';
import { benchVocabCurve } from './vocab-curve.ts';
import { benchVocabLarge } from './vocab-large.ts';
import { benchZoo } from './zoo.ts';

const BENCHES: Record<string, () => Promise<void>> = {
  cpu: benchCpu,
  cuda: benchCuda,
  hrt: benchHrt,
  jacobi: benchJacobi,
  lookup: benchLookup,
  onednn: benchOnednn,
  qgemm: benchQgemm,
  quantize: benchQuantize,
  'quantize-bits': benchQuantizeBits,
  queue: benchQueue,
  serve: benchServe,
  'share-rows': benchShareRows,
  translate: benchTranslate,
  tune: benchTune,
  vocab: benchVocab,
  'vocab-curve': benchVocabCurve,
  'vocab-large': benchVocabLarge,
  zoo: benchZoo,
};
BENCHES.soak = async () => (await import('./soak.ts')).benchSoak(); // 100,000 sentences through one planc translate: lines out, RSS growth

const name = process.argv[2];
const run = name ? BENCHES[name] : undefined;
if (!run) {
  console.error(`usage: npm run bench -- ${Object.keys(BENCHES).join('|')}`);
  process.exitCode = 2;
} else {
  await run();
}
