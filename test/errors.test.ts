// Bad input: truncated and non-ONNX files, missing external data, unknown dtypes, cycles, dangling inputs, unsupported ops.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { importModel, importOnnxFile, importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { buildModel, floatInit } from './helpers/onnx-build.ts';
import { needsShared, testIf } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-err-'));
const write = (name: string, bytes: Uint8Array | string) => {
  const p = path.join(tmp, name);
  fs.writeFileSync(p, bytes);
  return p;
};

/** Runs f, expecting a PlancError with this code whose message contains every given fragment. */
function expectError(f: () => unknown, code: string, ...fragments: string[]): PlancError {
  try {
    f();
  } catch (e) {
    assert.instance(e, PlancError, `expected a PlancError, got ${(e as Error).stack}`);
    const pe = e as PlancError;
    assert.is(pe.code, code, pe.message);
    for (const f of fragments) assert.ok(pe.message.includes(f), `message lacks '${f}': ${pe.message}`);
    return pe;
  }
  assert.unreachable(`expected ${code}`);
  throw new Error('unreachable');
}

const relu = (opts: Partial<Parameters<typeof buildModel>[0]> = {}) =>
  buildModel({
    inputs: [['x', 'float32', [2, 3]]],
    outputs: [['y', 'float32', [2, 3]]],
    nodes: [{ op: 'Relu', inputs: ['x'], outputs: ['y'], name: 'my_relu' }],
    ...opts,
  });

test('a valid tiny model imports', () => {
  const m = importOnnxFile(write('ok.onnx', relu()));
  assert.is(m.graphs.get('main')!.nodes[0]!.name, 'my_relu');
});

test('a truncated file is refused with PLANC_E001 naming the file', () => {
  const bytes = relu({
    initializers: [floatInit('w', [64], new Array(64).fill(1))],
    nodes: [{ op: 'Add', inputs: ['x', 'w'], outputs: ['y'] }],
  });
  const p = write('truncated.onnx', bytes.subarray(0, Math.floor(bytes.length * 0.6)));
  expectError(() => importOnnxFile(p), 'PLANC_E001', 'truncated.onnx', 'truncated or not ONNX');
});

test('a file that is not ONNX is refused with PLANC_E001', () => {
  const p = write('notes.onnx', 'this is a text file, not a model\n'.repeat(20));
  expectError(() => importOnnxFile(p), 'PLANC_E001', 'notes.onnx');
});

test('a missing file is PLANC_E006', () => {
  expectError(() => importModel(path.join(tmp, 'nope.onnx')), 'PLANC_E006', 'nope.onnx');
});

test('missing external data names the data file and the tensor', () => {
  const bytes = buildModel({
    inputs: [['x', 'float32', [4]]],
    outputs: [['y', 'float32', [4]]],
    initializers: [
      {
        name: 'big_w',
        dims: [4],
        dataType: 1,
        dataLocation: 1,
        externalData: [
          { key: 'location', value: 'missing.bin' },
          { key: 'offset', value: '0' },
          { key: 'length', value: '16' },
        ],
      },
    ],
    nodes: [{ op: 'Add', inputs: ['x', 'big_w'], outputs: ['y'] }],
  });
  expectError(() => importOnnxFile(write('ext.onnx', bytes)), 'PLANC_E002', "'missing.bin'", "'big_w'", 'ext.onnx');
});

test('external data shorter than the tensor is PLANC_E003', () => {
  write('short.bin', new Uint8Array(8));
  const bytes = buildModel({
    inputs: [['x', 'float32', [4]]],
    outputs: [['y', 'float32', [4]]],
    initializers: [
      {
        name: 'w',
        dims: [4],
        dataType: 1,
        dataLocation: 1,
        externalData: [
          { key: 'location', value: 'short.bin' },
          { key: 'offset', value: '0' },
          { key: 'length', value: '16' },
        ],
      },
    ],
    nodes: [{ op: 'Add', inputs: ['x', 'w'], outputs: ['y'] }],
  });
  expectError(() => importOnnxFile(write('short.onnx', bytes)), 'PLANC_E003', "'w'", 'short.bin');
});

test('an unknown dtype is PLANC_E004 naming the tensor', () => {
  const bytes = relu({ initializers: [{ name: 'f8', dims: [2], dataType: 17, rawData: new Uint8Array(2) }] });
  expectError(() => importOnnxFile(write('f8.onnx', bytes)), 'PLANC_E004', "'f8'", 'FLOAT8E4M3FN', 'f8.onnx');
});

test('a cycle is PLANC_E101 naming the nodes', () => {
  const bytes = relu({
    nodes: [
      { op: 'Add', inputs: ['x', 'b'], outputs: ['a'], name: 'add_a' },
      { op: 'Relu', inputs: ['a'], outputs: ['b'], name: 'relu_b' },
      { op: 'Relu', inputs: ['a'], outputs: ['y'], name: 'out' },
    ],
  });
  expectError(() => importOnnxFile(write('cycle.onnx', bytes)), 'PLANC_E101', 'cycle', 'add_a', 'relu_b', 'cycle.onnx');
});

test('a dangling input is PLANC_E102 naming the node and the value', () => {
  const bytes = relu({ nodes: [{ op: 'Add', inputs: ['x', 'nowhere'], outputs: ['y'], name: 'adder' }] });
  expectError(
    () => importOnnxFile(write('dangling.onnx', bytes)),
    'PLANC_E102',
    "'nowhere'",
    "'adder'",
    'dangling.onnx',
  );
});

test('unsupported operators are listed together in one PLANC_E005', () => {
  const bytes = relu({
    nodes: [
      { op: 'FooBar', inputs: ['x'], outputs: ['a'], name: 'foo1' },
      { op: 'Relu', inputs: ['a'], outputs: ['b'] },
      { op: 'Frobnicate', inputs: ['b'], outputs: ['y'], name: 'frob' },
    ],
  });
  expectError(() => importOnnxFile(write('unsup.onnx', bytes)), 'PLANC_E005', 'FooBar', 'Frobnicate', 'foo1', 'frob');
});

test('a folder without an encoder is PLANC_E009', () => {
  const d = path.join(tmp, 'empty-dir');
  fs.mkdirSync(d, { recursive: true });
  expectError(() => importSeq2SeqDir(d), 'PLANC_E009', 'encoder_model.onnx');
});

const cli = (...args: string[]) =>
  spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), ...args], { encoding: 'utf8' });

test('CLI: bad input exits 2 with the code and no stack trace; --debug shows the stack', () => {
  const p = write('cli-bad.onnx', 'garbage');
  const r = cli('inspect', p);
  assert.is(r.status, 2);
  assert.ok(r.stderr.includes('PLANC_E001'), r.stderr);
  assert.ok(r.stderr.includes('cli-bad.onnx'), r.stderr);
  assert.not.ok(/\n\s+at /.test(r.stderr), `stack trace printed: ${r.stderr}`);
  const d = cli('inspect', p, '--debug');
  assert.is(d.status, 2);
  assert.ok(/\n\s+at /.test(d.stderr), 'stack with --debug');
});

test('CLI: unsupported ops make inspect list them, not fail', () => {
  const p = write('cli-unsup.onnx', relu({ nodes: [{ op: 'FooBar', inputs: ['x'], outputs: ['y'], name: 'foo1' }] }));
  const r = cli('inspect', p, '--json');
  assert.is(r.status, 0, r.stderr);
  const j = JSON.parse(r.stdout);
  assert.equal(j.unsupported, [{ op: 'FooBar', nodes: ['main/foo1'] }]);
});

test('CLI: unknown options and commands exit 2 with usage', () => {
  const r = cli('inspect', '--frobnicate', 'x.onnx');
  assert.is(r.status, 2);
  assert.ok(r.stderr.includes('PLANC_E301') && r.stderr.includes('usage'), r.stderr);
  assert.is(cli('nosuchcommand').status, 2);
});

const shared = sharedDir();
const esen = shared && path.join(shared, 'models', 'es-en');
testIf(test, !esen || !fs.existsSync(esen) ? needsShared('models/es-en') : false)(
  'inspect es-en reports the decoder weights once although two files carry them',
  () => {
    const r = cli('inspect', esen!, '--json');
    assert.is(r.status, 0, r.stderr);
    const j = JSON.parse(r.stdout);
    assert.is(j.uniqueWeightBytes, fs.statSync(path.join(esen!, 'weights.bin')).size);
    assert.ok(j.storedWeightBytes > 2 * j.uniqueWeightBytes * 0.9, `stored ${j.storedWeightBytes}`);
    assert.equal(
      j.graphs.map((g: { name: string }) => g.name),
      ['encoder', 'decoder', 'decoder_with_past'],
    );
    assert.equal(j.unsupported, []);
  },
);

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
