// Child process of test/cudasim-plan.test.ts (the emulated device is chosen per process): loads a cuda plan on cudasim
// (PLANC_DEVICE=sim) and the cpu plan of the same model, then prints JSON. `graphs B1,B2`: every graph on random feeds
// at each batch on both, per output the max error relative to max |cpu|, NaN count and a hash of the emulator's bytes.
// `decode IDS.json`: greedy decoding of the id sources on both plans (the emulated one with CUDA graphs per env).
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { translateIds } from '../../../runtime/decode/translate-ids.ts';
import { loadPlan } from '../../../runtime/plan.ts';
import { cloneFeeds, randomFeeds } from '../../../test/helpers/random-feeds.ts';

const [mode, cudaFile, cpuFile, arg] = process.argv.slice(2);
/** The values output beside an ids output (topk_ids → topk_logprobs), or undefined. */
const VALUES_OF = (ids: string) => (ids.endsWith('topk_ids') ? ids.replace(/topk_ids$/, 'topk_logprobs') : undefined);
const sim = await loadPlan(cudaFile!);
const cpu = await loadPlan(cpuFile!);
const out: Record<string, unknown> = { device: sim.device };
try {
  if (mode === 'graphs') {
    const runs: Record<
      string,
      Record<
        string,
        { dims: number[]; rel: number; nan: number; exact: boolean; hash: string; idsDiffer?: number; idsGap?: number }
      >
    > = {};
    for (const batch of arg!.split(',').map(Number))
      for (const graph of sim.graphs) {
        const feeds = randomFeeds(sim, graph, {
          batch,
          srcLen: 7,
          past: 3,
          vocab: sim.header.decoding.vocabSize ?? 100,
          seed: 11,
        });
        // uint8 inputs (the --vocab active mask): about a third of the ids on, seeded
        for (const io of sim.inputs(graph)) {
          const f = feeds[io.name];
          if (io.dtype === 'uint8' && f)
            feeds[io.name] = {
              dtype: 'uint8',
              dims: f.dims,
              data: Uint8Array.from({ length: f.data.length }, (_, i) => (((i * 2654435761) >>> 7) % 3 === 0 ? 1 : 0)),
            };
        }
        const t0 = performance.now();
        const a = sim.runSync(graph, cloneFeeds(feeds));
        const t1 = performance.now();
        const b = cpu.runSync(graph, cloneFeeds(feeds));
        if (process.env.CUDASIM_TIMES === '1')
          process.stderr.write(
            `${cudaFile} ${graph} batch ${batch}: emulator ${((t1 - t0) / 1000).toFixed(1)} s, cpu ${((performance.now() - t1) / 1000).toFixed(2)} s\n`,
          );
        const key = `${graph} (batch ${batch})`;
        runs[key] = {};
        for (const [name, ref] of Object.entries(b)) {
          const got = a[name]!;
          const x = got.data as ArrayLike<number | bigint>,
            y = ref.data as ArrayLike<number | bigint>;
          let mx = 0,
            err = 0,
            nan = 0,
            exact = x.length === y.length;
          for (let i = 0; i < y.length; i++) {
            const r = Number(y[i]),
              v = Number(x[i]);
            if (Number.isNaN(v) !== Number.isNaN(r)) nan++;
            if (!Number.isNaN(r)) mx = Math.max(mx, Math.abs(r));
            if (!Number.isNaN(v) && !Number.isNaN(r) && Number.isFinite(r)) err = Math.max(err, Math.abs(v - r));
            if (x[i] !== y[i] && !(Number.isNaN(v) && Number.isNaN(r))) exact = false;
          }
          const bytes = new Uint8Array(got.data.buffer, got.data.byteOffset, got.data.byteLength);
          runs[key]![name] = {
            dims: got.dims,
            rel: err / (mx || 1),
            nan,
            exact,
            hash: createHash('sha256').update(bytes).digest('hex').slice(0, 16),
          };
        }
        // ids that differ: how many, and how far apart their values are on the two sides (relative to max |cpu value|):
        // a near tie when that gap is within rounding (the values output is VALUES_OF the ids output)
        for (const [name, ref] of Object.entries(b)) {
          const valuesName = VALUES_OF(name);
          if (!valuesName || !b[valuesName] || !a[valuesName]) continue;
          const x = a[name]!.data as ArrayLike<number | bigint>,
            y = ref.data as ArrayLike<number | bigint>;
          const vx = a[valuesName]!.data as Float32Array,
            vy = b[valuesName]!.data as Float32Array;
          let mx = 0;
          for (const v of vy) if (Number.isFinite(v)) mx = Math.max(mx, Math.abs(v));
          let differ = 0,
            gap = 0;
          for (let i = 0; i < y.length; i++) {
            if (x[i] === y[i]) continue;
            differ++;
            gap = Math.max(gap, Math.abs(vx[i]! - vy[i]!) / (mx || 1));
          }
          Object.assign(runs[key]![name]!, { idsDiffer: differ, idsGap: gap });
        }
      }
    out.runs = runs;
  } else if (mode === 'decode') {
    const sources = JSON.parse(fs.readFileSync(arg!, 'utf8')) as number[][];
    const o = {
      maxLength: Number(process.env.CUDASIM_MAX_LENGTH ?? 12),
      batchSize: Number(process.env.CUDASIM_BATCH ?? 4),
    };
    out.sim = (await translateIds(sim, sources, o)).map((r) => r.ids);
    out.cpu = (await translateIds(cpu, sources, o)).map((r) => r.ids);
  }
} catch (e) {
  out.error = (e as Error).stack ?? String(e);
}
sim.close();
cpu.close();
console.log(JSON.stringify(out));
