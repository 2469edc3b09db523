// planc optimize --emit-ts: the typed module of a synthetic plan type-checks a correct program with tsc, and a wrong
// feed name, dtype, rank, graph or output, or translate on a plan without a tokenizer, fails to type-check where expected.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../compiler/paths.ts';
import { readPlanFile } from '../compiler/plan/format.ts';
import { emitPlanTypes } from '../codegen/emit-ts.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { planc } from './helpers/planc-cli.ts';

// Inside the checkout (.tmp-*/ is ignored) so that tsc finds @types/node; `planc` resolves to the sources' index.ts.
const tmp = fs.mkdtempSync(path.join(REPO_ROOT, '.tmp-emit-ts-'));
const model = path.join(tmp, 'model');
makeModel({
  arch: 'marian',
  d: 16,
  encoderLayers: 1,
  decoderLayers: 1,
  heads: 2,
  ffn: 32,
  vocab: 101,
  maxPos: 64,
  activation: 'relu',
  seed: 3,
  out: model,
});
fs.writeFileSync(
  path.join(model, 'tokenizer.json'),
  JSON.stringify({
    version: '1.0',
    added_tokens: [],
    normalizer: null,
    pre_tokenizer: { type: 'WhitespaceSplit' },
    post_processor: null,
    decoder: null,
    model: {
      type: 'WordLevel',
      vocab: Object.fromEntries(
        Array.from({ length: 101 }, (_, i) => [i === 0 ? '</s>' : i === 1 ? '<unk>' : `w${i}`, i]),
      ),
      unk_token: '<unk>',
    },
  }),
);
const PLAN = path.join(tmp, 'tiny.plan');

const GOOD = `import { load, SYMBOL_MAX } from './tiny-plan.ts';
const plan = await load();
const enc = await plan.run('encoder', {
  input_ids: { dtype: 'int64', dims: [1, 3], data: BigInt64Array.from([5n, 6n, 0n]) },
  attention_mask: { dtype: 'int64', dims: [1, 3], data: BigInt64Array.from([1n, 1n, 1n]) },
});
const hidden: Float32Array = enc.last_hidden_state.data;
const [batch, length, width] = enc.last_hidden_state.dims;
const fixedWidth: 16 = width;
const texts: string[] = await plan.translate(['w5 w6'], { beamSize: 2 });
const ids = await plan.translateIds([[5, 6, 0]]);
console.log(hidden.length, batch + length, fixedWidth, texts, ids[0]!.ids, SYMBOL_MAX.batch_size);
plan.close();
`;

/** Each wrong use, and the line (1-based) and TypeScript error code tsc must report for it. */
const BAD: { what: string; line: number; code: string; text: RegExp }[] = [];
const badLines: string[] = ["import { load } from './tiny-plan.ts';", 'const plan = await load();'];
function bad(what: string, code: string, text: RegExp, src: string): void {
  BAD.push({ what, line: badLines.length + 1, code, text });
  badLines.push(src);
}
bad(
  'a wrong feed name',
  'TS2561',
  /'input_idz' does not exist in type 'EncoderFeeds'/,
  "await plan.run('encoder', { input_idz: { dtype: 'int64', dims: [1, 3], data: new BigInt64Array(3) }, attention_mask: { dtype: 'int64', dims: [1, 3], data: new BigInt64Array(3) } });",
);
bad(
  'a wrong dtype',
  'TS2322',
  /'"float32"' is not assignable to type '"int64"'/,
  "await plan.run('encoder', { input_ids: { dtype: 'float32', dims: [1, 3], data: new BigInt64Array(3) }, attention_mask: { dtype: 'int64', dims: [1, 3], data: new BigInt64Array(3) } });",
);
bad(
  'data of another dtype',
  'TS2322',
  /'Float32Array[^']*' is not assignable to type 'BigInt64Array/,
  "await plan.run('encoder', { input_ids: { dtype: 'int64', dims: [1, 3], data: new Float32Array(3) }, attention_mask: { dtype: 'int64', dims: [1, 3], data: new BigInt64Array(3) } });",
);
bad(
  'a wrong rank',
  'TS2322',
  /Source has 3 element\(s\) but target allows only 2/,
  "await plan.run('encoder', { input_ids: { dtype: 'int64', dims: [1, 3, 1], data: new BigInt64Array(3) }, attention_mask: { dtype: 'int64', dims: [1, 3], data: new BigInt64Array(3) } });",
);
bad(
  'a missing feed',
  'TS2345',
  /Property 'attention_mask' is missing/,
  "await plan.run('encoder', { input_ids: { dtype: 'int64', dims: [1, 3], data: new BigInt64Array(3) } });",
);
bad(
  'a graph the plan lacks',
  'TS2345',
  /'"encodr"' is not assignable to parameter of type 'keyof Graphs'/,
  "await plan.run('encodr', {});",
);
bad(
  'an output the graph lacks',
  'TS2339',
  /'logits' does not exist/,
  "console.log((await plan.run('decoder_with_past', {} as never)).logits);",
);

/** tsc over the generated module and the programs: its errors as { file, line, code, text }. */
function typecheck(files: Record<string, string>): { file: string; line: number; code: string; text: string }[] {
  const dir = fs.mkdtempSync(path.join(tmp, 'tsc-'));
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        noUnusedLocals: true,
        allowImportingTsExtensions: true,
        skipLibCheck: true,
        types: ['node'],
        paths: { planc: [path.join(REPO_ROOT, 'index.ts')] },
      },
      files: Object.keys(files),
    }),
  );
  const r = spawnSync(
    process.execPath,
    [path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir, '--pretty', 'false'],
    { encoding: 'utf8' },
  );
  const errors = [...r.stdout.matchAll(/^(.+?)\((\d+),\d+\): error (TS\d+): (.*(?:\n {2}.*)*)/gm)].map((m) => ({
    file: path.basename(m[1]!),
    line: Number(m[2]),
    code: m[3]!,
    text: m[4]!,
  }));
  assert.ok(r.status === 0 || errors.length > 0, `tsc failed without diagnostics: ${r.stdout}${r.stderr}`);
  return errors;
}

test('planc optimize --emit-ts writes the module beside the plan; a correct program type-checks, wrong feeds do not', () => {
  const ts = path.join(tmp, 'tiny-plan.ts');
  const r = planc([
    'optimize',
    model,
    '-o',
    PLAN,
    '--emit-ts',
    ts,
    '--quiet',
    '--max-batch',
    '2',
    '--max-src-len',
    '8',
    '--max-tgt-len',
    '8',
  ]);
  assert.is(r.status, 0, r.stderr);
  const text = fs.readFileSync(ts, 'utf8');
  assert.match(text, /from 'planc'/);
  assert.match(text, /fileURLToPath\(new URL\('\.\/tiny\.plan', import\.meta\.url\)\)/);
  assert.match(text, /input_ids: Feed<'int64', \[batch_size: number, encoder_sequence_length: number\]>/);
  assert.match(
    text,
    /last_hidden_state: Tensor<'float32', \[batch_size: number, encoder_sequence_length: number, dim2: 16\]>/,
  );

  // One tsc run: this module with a correct and a wrong program, and the module of the same plan without its tokenizer.
  const untokenized = emitPlanTypes({ ...readPlanFile(PLAN).header, tokenizerKind: '' }, { planPath: 'tiny.plan' });
  const errors = typecheck({
    'tiny-plan.ts': text,
    'good.ts': GOOD,
    'bad.ts': `${badLines.join('\n')}\n`,
    'ids-plan.ts': untokenized,
    'ids-use.ts': "import { load } from './ids-plan.ts';\nawait (await load()).translate(['x']);\n",
  });
  assert.equal(
    errors.filter((e) => e.file !== 'bad.ts' && e.file !== 'ids-use.ts'),
    [],
    'the modules and the correct program type-check',
  );
  const noTranslate = errors.filter((e) => e.file === 'ids-use.ts');
  assert.equal(
    noTranslate.map((e) => [e.line, e.code]),
    [[2, 'TS2551']],
    'no translate without a tokenizer',
  );
  assert.match(
    noTranslate[0]!.text,
    /Property 'translate' does not exist on type 'TypedPlan'\. Did you mean 'translateIds'\?/,
  );
  const bads = errors.filter((e) => e.file === 'bad.ts');
  for (const b of BAD) {
    const at = bads.filter((e) => e.line === b.line);
    assert.ok(
      at.some((e) => e.code === b.code && b.text.test(e.text)),
      `${b.what} (line ${b.line}): want ${b.code} ${b.text}, got ${JSON.stringify(at)}`,
    );
  }
  assert.equal(
    [...new Set(bads.map((e) => e.line))].sort((a, b) => a - b),
    BAD.map((b) => b.line),
    'errors only on the wrong lines',
  );
});

test('a plan without a tokenizer has no translate wrapper; tensor names that are not identifiers are quoted', () => {
  const text = emitPlanTypes({ ...readPlanFile(PLAN).header, tokenizerKind: '' }, { planPath: '/plans/tiny.plan' });
  assert.match(text, /translateIds\(ids: number\[\]\[\]/);
  assert.not.match(text, /translate\(texts/);
  assert.not.match(text, /TranslateOptions/);
  assert.match(text, /export const PLAN_FILE = '\/plans\/tiny\.plan';/);
  assert.match(
    text,
    /'present\.0\.decoder\.key': Tensor<'float32', \[batch_size: number, dim1: 2, decoder_sequence_length: number, dim3: 8\]>/,
  );
});

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test.run();
