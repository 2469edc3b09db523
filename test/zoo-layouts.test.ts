// The zoo's optimum exports in both layouts users have (three files, merged-only) give the same plan and decode
// alike; what planc cannot lower or bound is refused with every node named.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { inferModel } from '../model/infer/infer.ts';
import { importModel } from '../model/onnx/import-model.ts';
import { dimStr, dimSymbols } from '../compiler/symbolic.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { buildModel } from './helpers/onnx-build.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, skipSuite, testIf } from './helpers/skip.ts';
import { ZOO, zooFamilies, zooReference } from './helpers/zoo.ts';

const zoo = ZOO;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-zoo-layouts-'));

/** What a user of the merged layout has: the encoder, the merged decoder and the config/tokenizer files. */
const MERGED_ONLY = [
  'encoder_model.onnx',
  'decoder_model_merged.onnx',
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
];

interface GraphFacts {
  name: string;
  kernelCount: number;
  fusedOps: Record<string, number>;
}

function inspectPlan(file: string): { graphs: GraphFacts[]; uniqueWeightBytes: number } {
  const r = planc(['inspect', file, '--json']);
  assert.is(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** The family's merged-only layout (links to its files) under tmp, made on first use. */
function mergedLayout(family: string): string {
  const merged = path.join(tmp, `${family}-merged`);
  if (fs.existsSync(merged)) return merged;
  const src = path.join(zoo!, family);
  fs.mkdirSync(merged);
  for (const f of MERGED_ONLY)
    if (fs.existsSync(path.join(src, f))) fs.symlinkSync(path.join(src, f), path.join(merged, f));
  return merged;
}

function translateIds(plan: string, src: number[][]): number[][] {
  const r = planc(
    ['translate', plan, '--ids', '--max-length', '32', '--beam', '1'],
    src.map((s) => s.join(' ')).join('\n') + '\n',
  );
  assert.is(r.status, 0, r.stderr);
  return r.stdout
    .split('\n')
    .slice(0, src.length)
    .map((l) => (l.trim() ? l.trim().split(/\s+/).map(Number) : []));
}

const families = zooFamilies();
if (families.length === 0 || !nativeAvailable()) {
  skipSuite(test, families.length === 0 ? needsShared('models/zoo') : NEEDS_NATIVE, [
    ...(families.length ? families : ['<family>']).map(
      (family) =>
        `${family}: the merged-only layout gives the three-file plan and the same greedy output (reference 20/20)`,
    ),
    "inference of every zoo graph (both layouts) leaves only the model's own symbols: no unnamed dimension",
    'a length beyond the position table is refused at optimize time, naming the limit',
  ]);
} else {
  for (const family of families) {
    test(`${family}: the merged-only layout gives the three-file plan and the same greedy output (reference 20/20)`, () => {
      const src = path.join(zoo!, family);
      const merged = mergedLayout(family);
      const three = path.join(tmp, `${family}.plan`);
      const one = path.join(tmp, `${family}-merged.plan`);
      for (const [dir, out] of [
        [src, three],
        [merged, one],
      ] as const) {
        const r = planc(['optimize', dir, '-o', out, '--quiet']);
        assert.is(r.status, 0, `optimize ${dir}: ${r.stderr}`);
      }
      const a = inspectPlan(three);
      const b = inspectPlan(one);
      assert.equal(b.graphs.map((g) => g.name).slice(0, 3), ['encoder', 'decoder', 'decoder_with_past']); // then the row-lengths graphs (not t5's)
      assert.equal(
        b.graphs.map((g) => [g.name, g.kernelCount, g.fusedOps]),
        a.graphs.map((g) => [g.name, g.kernelCount, g.fusedOps]),
      );
      assert.is(b.uniqueWeightBytes, a.uniqueWeightBytes, 'weights stored once in both layouts');
      const ref = zooReference(family);
      const outThree = translateIds(three, ref.src_ids);
      const outOne = translateIds(one, ref.src_ids);
      assert.equal(outOne, outThree);
      const same = outThree.filter(
        (ids, i) => JSON.stringify(ids) === JSON.stringify(ref.greedy_ids_hf_generation_config[i]),
      ).length;
      assert.is(
        same,
        ref.src_ids.length,
        `${family}: ${same}/${ref.src_ids.length} identical to greedy_ids_hf_generation_config`,
      );
    });
  }

  test("inference of every zoo graph (both layouts) leaves only the model's own symbols: no unnamed dimension", () => {
    for (const family of families) {
      for (const dir of [path.join(zoo!, family), mergedLayout(family)]) {
        const model = importModel(dir);
        const symbols = new Set(
          [...model.graphs.values()].flatMap((g) =>
            g.inputs.flatMap((i) => (g.values.get(i)?.type?.shape ?? []).flatMap(dimSymbols)),
          ),
        );
        for (const [graph, facts] of inferModel(model)) {
          for (const [v, f] of facts) {
            for (const d of [...(f.shape ?? []), ...(f.sym ?? [])]) {
              for (const s of dimSymbols(d))
                assert.ok(symbols.has(s), `${dir} ${graph}: '${v}' has dimension '${dimStr(d)}'`);
            }
          }
        }
      }
    }
  });

  const positions = (f: string) =>
    JSON.parse(fs.readFileSync(path.join(zoo!, f, 'config.json'), 'utf8')).max_position_embeddings as
      | number
      | undefined;
  const bounded = families.find(positions);
  const noLimit = !bounded && 'need a zoo family whose config.json states max_position_embeddings';
  testIf(test, noLimit)('a length beyond the position table is refused at optimize time, naming the limit', () => {
    const limit = positions(bounded!)!;
    const r = planc([
      'optimize',
      path.join(zoo!, bounded!),
      '-o',
      path.join(tmp, 'long.plan'),
      '--max-tgt-len',
      String(limit + 1),
    ]);
    assert.is.not(r.status, 0);
    assert.match(
      r.stderr,
      /PLANC_E301: --max-tgt-len \d+ is beyond the model's position table: it covers \d+ positions \(max_position_embeddings in /,
    );
  });
}

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [
    'a model with several nodes the CPU backend cannot lower is refused with one message naming each',
  ]);
} else {
  test('a model with several nodes the CPU backend cannot lower is refused with one message naming each', () => {
    const file = path.join(tmp, 'unlowerable.onnx');
    fs.writeFileSync(
      file,
      buildModel({
        inputs: [['x', 'float32', [2, 2]]],
        outputs: [['y', 'float32', [2, 2]]],
        nodes: [
          { op: 'Acos', inputs: ['x'], outputs: ['a'], name: 'first_acos' },
          { op: 'Relu', inputs: ['a'], outputs: ['b'], name: 'after_acos' },
          { op: 'Asin', inputs: ['x'], outputs: ['c'], name: 'the_asin' },
          { op: 'Add', inputs: ['b', 'c'], outputs: ['y'], name: 'sum' },
        ],
      }),
    );
    const r = planc(['optimize', file, '-o', path.join(tmp, 'unlowerable.plan')]);
    assert.is(r.status, 2, r.stderr);
    assert.match(r.stderr, /PLANC_E404: 2 nodes cannot be lowered:/);
    assert.match(r.stderr, /Acos 'first_acos' in graph main: /);
    assert.match(r.stderr, /Asin 'the_asin' in graph main: /);
    assert.not.match(r.stderr, /after_acos|'sum'/, 'nodes after an unlowerable one are not reported again');
    assert.not.match(r.stderr, /\n\s+at /, 'no stack trace');
  });
}

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
