// Issue 26's internal errors and silent wrong answers: each is a named PlancError at the earliest layer that can know.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import protobuf from 'protobufjs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fargIndex } from '../compiler/kernel-schema.ts';
import { importOnnxFile } from '../model/onnx/import-model.ts';
import { onnx } from '../model/onnx/proto.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { tensorFrom } from '../runtime/tensor.ts';
import { failsWith } from './helpers/expect-error.ts';
import { buildModel } from './helpers/onnx-build.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';
import { makeTinyTextPlan } from './helpers/tiny-text-plan.ts';
import { makeModel } from '../scripts/make-model/generate.ts';

const PlanMsg = protobuf.loadSync(path.join(REPO_ROOT, 'compiler', 'plan', 'plan.proto')).lookupType('planc.Plan');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-bad-input-'));
const write = (name: string, bytes: Uint8Array | string) => {
  const p = path.join(tmp, name);
  fs.writeFileSync(p, bytes);
  return p;
};

/** A CLI run that fails with exit 2 and a message with this code and every fragment (never an internal error). */
function cliFails(args: string[], code: string, ...fragments: string[]): string {
  const r = planc(args);
  assert.is(r.status, 2, `exit status of planc ${args.join(' ')}: ${r.stderr}`);
  assert.not.match(r.stderr, /internal error/);
  assert.ok(r.stderr.includes(code), `no ${code}: ${r.stderr}`);
  for (const f of fragments) assert.ok(r.stderr.includes(f), `message lacks '${f}': ${r.stderr}`);
  return r.stderr;
}

const relu = (dims: number[], opset = 17) =>
  buildModel({
    inputs: [['x', 'float32', dims]],
    outputs: [['y', 'float32', dims]],
    nodes: [{ op: 'Relu', inputs: ['x'], outputs: ['y'] }],
    opset,
  });

test('an ONNX dim beyond 2^31 - 1 is PLANC_E008 at import, naming the value and dim', () => {
  failsWith(
    () => importOnnxFile(write('dim40.onnx', relu([2 ** 40, 16]))),
    'PLANC_E008',
    "value 'x' declares dim 0 = 1099511627776",
  );
  failsWith(() => importOnnxFile(write('dim31.onnx', relu([4, 2 ** 31]))), 'PLANC_E008', 'dim 1 = 2147483648');
});

test('opset 99 and 2^31 are PLANC_E008 at import, naming the opset', () => {
  failsWith(() => importOnnxFile(write('op99.onnx', relu([2, 3], 99))), 'PLANC_E008', 'opset 99 of domain');
  failsWith(() => importOnnxFile(write('op31.onnx', relu([2, 3], 2 ** 31))), 'PLANC_E008', 'opset 2147483648');
  failsWith(() => importOnnxFile(write('op0.onnx', relu([2, 3], 0))), 'PLANC_E008', 'opset 0');
});

test('a model folder whose external data file is a folder: PLANC_E002 naming it, not an internal error (fuzz folder case 99)', () => {
  const dir = path.join(tmp, 'weights-folder');
  makeModel({
    arch: 'marian',
    d: 16,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 2,
    ffn: 32,
    vocab: 50,
    maxPos: 32,
    activation: 'relu',
    seed: 5,
    out: dir,
  });
  const data = fs.readdirSync(dir).filter((f) => !f.endsWith('.onnx') && !f.endsWith('.json'));
  assert.ok(data.length > 0, `the synthetic model keeps external data: ${fs.readdirSync(dir).join(', ')}`);
  for (const f of data) {
    fs.rmSync(path.join(dir, f));
    fs.mkdirSync(path.join(dir, f));
  }
  cliFails(['optimize', dir, '-o', path.join(tmp, 'weights-folder.plan')], 'PLANC_E002', 'is not a file');
});

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, ['tiny-plan cases']);
} else {
  const plan = makeTinyTextPlan(tmp);
  const model = path.join(tmp, 'tiny-model');
  const good = fs.readFileSync(plan);
  const headLen = new DataView(good.buffer, good.byteOffset).getUint32(12, true);
  type Header = {
    programs: {
      graph: string;
      outputs: { name: string; tensor: number }[];
      tensors: { name: string }[];
      kernels: { name: string; fargs: number[] }[];
    }[];
  };
  const header = (): Header =>
    PlanMsg.toObject(PlanMsg.decode(good.subarray(24, 24 + headLen)), {
      longs: Number,
      defaults: true,
      arrays: true,
    }) as Header;
  /** The plan with an edited header and fresh checksums, so the edit reaches the validator. */
  const reencode = (h: Header): Uint8Array => {
    const head = PlanMsg.encode(PlanMsg.fromObject(h)).finish();
    const blob = good.subarray(Math.ceil((24 + headLen) / 64) * 64);
    const start = Math.ceil((24 + head.length) / 64) * 64;
    const out = new Uint8Array(start + blob.length);
    out.set(good.subarray(0, 24));
    const dv = new DataView(out.buffer);
    dv.setUint32(12, head.length, true);
    dv.setUint32(16, crc32(head) >>> 0, true);
    out.set(head, 24);
    out.set(blob, start);
    return out;
  };
  const program = (h: Header, g: string) => h.programs.find((p) => p.graph === g)!;

  test('the unedited plan loads after re-encoding', () => {
    loadPlanBytes(reencode(header()), 'same.plan').close();
  });

  test('--max-batch 2^40 and --max-dim batch_size=0 are PLANC_E301 naming the option', () => {
    cliFails(
      ['optimize', model, '-o', path.join(tmp, 'x.plan'), '--quiet', '--max-batch', '1099511627776'],
      'PLANC_E301',
      '--max-batch',
      '2147483647',
    );
    cliFails(
      ['optimize', model, '-o', path.join(tmp, 'x.plan'), '--quiet', '--max-dim', 'batch_size=0'],
      'PLANC_E301',
      '--max-dim batch_size=0',
    );
    cliFails(
      ['optimize', model, '-o', path.join(tmp, 'x.plan'), '--quiet', '--max-dim', 'batch_size=99999999999'],
      'PLANC_E301',
      '--max-dim batch_size=99999999999',
    );
  });

  test('a profile whose tensors exceed what a plan addresses is PLANC_E404 naming the tensor and the options', () => {
    cliFails(
      [
        'optimize',
        model,
        '-o',
        path.join(tmp, 'x.plan'),
        '--quiet',
        '--max-batch',
        '2147483647',
        '--max-dim',
        'encoder_sequence_length=100000',
      ],
      'PLANC_E404',
      "tensor 'input_ids'",
      'batch_size ≤ 2147483647',
      '--max-batch',
      'more than a plan can address',
    );
  });

  test('--eos-id outside the vocabulary is PLANC_E301 at optimize', () => {
    cliFails(
      ['optimize', model, '-o', path.join(tmp, 'x.plan'), '--quiet', '--eos-id', '1000'],
      'PLANC_E301',
      "--eos-id 1000 is outside the model's vocabulary [0, 101)",
    );
  });

  /** A copy of the tiny model folder with one graph's output renamed. */
  const renamed = (file: string, from: string, to: string): string => {
    const dir = path.join(tmp, `renamed-${from}`);
    fs.cpSync(model, dir, { recursive: true });
    const m = onnx.ModelProto.decode(fs.readFileSync(path.join(dir, file)));
    for (const o of m.graph!.output!) if (o.name === from) o.name = to;
    for (const n of m.graph!.node!) n.output = n.output!.map((x) => (x === from ? to : x));
    fs.writeFileSync(path.join(dir, file), onnx.ModelProto.encode(m).finish());
    return dir;
  };

  test('optimize refuses a seq2seq folder without the outputs decoding reads, naming the graph and output', () => {
    cliFails(
      [
        'optimize',
        renamed('decoder_with_past_model.onnx', 'logits', 'scores'),
        '-o',
        path.join(tmp, 'x.plan'),
        '--quiet',
      ],
      'PLANC_E009',
      "graph 'decoder_with_past' has no output 'logits'",
      'scores',
    );
    cliFails(
      [
        'optimize',
        renamed('encoder_model.onnx', 'last_hidden_state', 'hidden'),
        '-o',
        path.join(tmp, 'x.plan'),
        '--quiet',
      ],
      'PLANC_E009',
      "graph 'encoder' has no output 'last_hidden_state'",
    );
  });

  test('the validator refuses crafted plans without the outputs translation reads', () => {
    let h = header();
    program(h, 'encoder').outputs = [];
    failsWith(() => loadPlanBytes(reencode(h), 'noenc.plan'), 'PLANC_E401', "program 'encoder' has no outputs");
    h = header();
    program(h, 'encoder').outputs[0]!.name = 'hidden';
    failsWith(
      () => loadPlanBytes(reencode(h), 'hidden.plan'),
      'PLANC_E401',
      "program 'encoder' has no output 'last_hidden_state'",
    );
    h = header();
    const dwp = program(h, 'decoder_with_past');
    dwp.outputs = dwp.outputs.filter((o) => o.name !== 'topk_ids');
    failsWith(
      () => loadPlanBytes(reencode(h), 'noids.plan'),
      'PLANC_E401',
      "program 'decoder_with_past' has no output 'logits'",
    );
    // fuzz plan case 51 of seed 26: a first step without a present output loaded, and translate failed every line
    for (const gone of ['present.0.decoder.key', 'present.0.encoder.value']) {
      h = header();
      const dec = program(h, 'decoder');
      assert.ok(
        dec.outputs.some((o) => o.name === gone),
        `the tiny plan's decoder has ${gone}`,
      );
      dec.outputs = dec.outputs.filter((o) => o.name !== gone);
      failsWith(
        () => loadPlanBytes(reencode(h), 'nopresent.plan'),
        'PLANC_E401',
        `program 'decoder' has no output '${gone}', which fills the cache`,
      );
    }
  });

  test('the validator refuses an output pointing at a tensor of another dtype or rank', () => {
    const h = header();
    const dwp = program(h, 'decoder_with_past');
    const ids = dwp.outputs.find((o) => o.name === 'topk_ids')!;
    ids.tensor = dwp.outputs.find((o) => o.name === 'topk_logprobs')!.tensor; // float32 scores read as ids
    failsWith(() => loadPlanBytes(reencode(h), 'ids.plan'), 'PLANC_E401', "output 'topk_ids' points at tensor");
    const h2 = header();
    const enc = program(h2, 'encoder');
    enc.outputs[0]!.tensor = 0; // input_ids, int64 rank 2
    failsWith(
      () => loadPlanBytes(reencode(h2), 'lhs.plan'),
      'PLANC_E401',
      "output 'last_hidden_state' points at tensor 0",
    );
  });

  test('the validator refuses a NaN or infinite attention scale and a NaN epsilon', () => {
    for (const [kernel, value] of [
      ['attention', NaN],
      ['attention', Infinity],
      ['layer_norm', NaN],
    ] as const) {
      const h = header();
      const arg = kernel === 'attention' ? 'scale' : 'epsilon';
      program(h, 'decoder_with_past').kernels.find((k) => k.name === kernel)!.fargs[fargIndex(kernel, arg)] = value;
      failsWith(
        () => loadPlanBytes(reencode(h), 'nan.plan'),
        'PLANC_E401',
        `(${kernel}) has float argument ${arg} = ${value}`,
      );
    }
  });

  test('planc run on a crafted plan without outputs fails with exit 2, never silently', () => {
    const h = header();
    program(h, 'encoder').outputs = [];
    const p = write('no-outputs.plan', reencode(h));
    const feeds = write('enc.json', JSON.stringify({ input_ids: [[3, 4, 0]], attention_mask: [[1, 1, 1]] }));
    cliFails(['run', p, '--graph', 'encoder', '--inputs', feeds], 'PLANC_E401', 'no outputs');
  });

  test('planc run --inputs: null, an array and 200,000 nested [ are PLANC_E405 naming the file', () => {
    cliFails(
      ['run', plan, '--graph', 'encoder', '--inputs', write('null.json', 'null')],
      'PLANC_E405',
      'null.json',
      'holds null',
    );
    cliFails(
      ['run', plan, '--graph', 'encoder', '--inputs', write('array.json', '[[1]]')],
      'PLANC_E405',
      'array.json',
      'holds an array',
    );
    cliFails(
      [
        'run',
        plan,
        '--graph',
        'encoder',
        '--inputs',
        write('deep.json', `{"input_ids": ${'['.repeat(200000)}${']'.repeat(200000)}}`),
      ],
      'PLANC_E405',
      'deep.json',
      "feed 'input_ids' nests arrays more than 8 deep",
    );
    cliFails(
      [
        'run',
        plan,
        '--graph',
        'encoder',
        '--inputs',
        write('deep-top.json', `${'['.repeat(200000)}${']'.repeat(200000)}`),
      ],
      'PLANC_E405',
      'deep-top.json',
    );
    cliFails(
      ['run', plan, '--graph', 'encoder', '--inputs', write('null-feed.json', '{"input_ids": null}')],
      'PLANC_E405',
      "feed 'input_ids' must hold numbers",
    );
  });

  test("a ragged array is PLANC_E405 naming the position, even when its count fits the first row's dims", () => {
    const run = (name: string, ids: unknown) =>
      cliFails(
        [
          'run',
          plan,
          '--graph',
          'encoder',
          '--inputs',
          write(
            name,
            JSON.stringify({
              input_ids: ids,
              attention_mask: [
                [1, 1, 1, 1],
                [1, 1, 1, 1],
              ],
            }),
          ),
        ],
        'PLANC_E405',
        'ragged',
      );
    assert.match(
      run('rag-count.json', [
        [3, 5, 6, 4],
        [7, 8, [9], 4],
      ]),
      'input_ids[1][2] is an array',
    );
    assert.match(
      run('rag-short.json', [
        [3, 5, 6, 4],
        [7, 8],
      ]),
      'input_ids[1] has 2 entries where input_ids[0] has 4',
    );
    assert.match(run('rag-flat.json', [[3, 5, 6, 4], 7]), 'input_ids[1] is 7');
  });

  test('token ids outside the vocabulary and attention-mask values other than 0/1 are PLANC_E405 at the feed check', () => {
    const p = loadPlanBytes(good, plan);
    try {
      const run = (ids: number[], mask: number[]) =>
        p.runSync('encoder', {
          input_ids: tensorFrom('int64', [1, 3], ids),
          attention_mask: tensorFrom('int64', [1, 3], mask),
        });
      failsWith(() => run([-1, 5, 0], [1, 1, 1]), 'PLANC_E405', "feed 'input_ids' holds token id -1 at 0");
      failsWith(() => run([3, 101, 0], [1, 1, 1]), 'PLANC_E405', 'token id 101 at 1, outside the vocabulary [0, 101)');
      for (const m of [2, -1, 7])
        failsWith(() => run([3, 5, 0], [1, m, 1]), 'PLANC_E405', `feed 'attention_mask' holds ${m} at 1`);
      run([3, 5, 0], [1, 1, 0]);
    } finally {
      p.close();
    }
  });

  test('translate: decoding-option errors name the CLI flag and value (the library error carries option, value, expected)', () => {
    const input = 'w3 w4\nw5\n';
    const cases: [string[], string][] = [
      [['--beam', '0'], '--beam 0: it must be an integer in [1, 64]'],
      [['--batch', '0'], '--batch 0: it must be an integer in [1, 65536]'],
      [['--length-penalty', '20'], '--length-penalty 20: it must be a number in [-10, 10]'], // generate() allows a negative penalty (shorter favoured)
      [['--max-length', '0'], '--max-length 0: it must be an integer in [1, 65536]'],
      [['--strategy', 'xx'], '--strategy xx: it must be auto or one of greedy, beam'],
      [['--strategy', 'greedy', '--beam', '2'], "--beam 2: it must be 1 with strategy 'greedy'"],
      [['--beam', '5'], "--beam 5: it must be in [1, 4] (the plan's maxBatch)"],
    ];
    for (const [flags, want] of cases) {
      const r = planc(['translate', plan, ...flags], input);
      assert.is(r.status, 2, r.stderr);
      assert.ok(r.stderr.includes(`PLANC_E301: ${want}`), `${flags.join(' ')}: ${r.stderr}`);
      assert.not.match(r.stderr, /beamSize|batchSize|lengthPenalty|maxLength =/);
      assert.is(r.stdout, '');
    }
  });

  test('translate --strategy pgj on a one-token plan fails once, before input is read', () => {
    const oneToken = makeTinyTextPlan(tmp, ['--step-tokens', '1'], 'tiny-step1');
    const r = planc(
      ['translate', oneToken, '--strategy', 'pgj'],
      Array.from({ length: 20 }, () => 'w3 w4').join('\n') + '\n',
    );
    assert.is(r.status, 2, r.stderr);
    assert.is(r.stderr.match(/PLANC_E/g)?.length, 1, r.stderr);
    assert.match(
      r.stderr,
      /PLANC_E301: --strategy pgj: strategy 'pgj' feeds blocks of 3 tokens \(--jacobi-block\).*--step-tokens 3/,
    );
    assert.not.match(r.stderr, /line \d+:/);
    assert.is(r.stdout, '');
  });

  test('translate --threads over the CPUs warns, naming the CPUs', () => {
    const r = planc(['translate', plan, '--threads', '999', '--quiet'], 'w3 w4\n');
    assert.is(r.status, 0, r.stderr);
    assert.match(r.stderr, /planc: warning: --threads 999 is more than the \d+ CPUs? this process may use/);
    assert.is(r.stdout.split('\n').length, 2);
  });

  test('translate: a line of invalid UTF-8 fails alone with PLANC_E012; the summary counts it as failed, not translated', () => {
    const input = Buffer.concat([
      Buffer.from('w3 w4\nw5 '),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from(' w6\r\nw7\n'),
    ]);
    const r = spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), 'translate', plan], {
      input,
      encoding: 'utf8',
    });
    assert.is(r.status, 2, r.stderr);
    assert.match(r.stderr, /line 2: PLANC_E012: the line \(\d+ bytes\) is not valid UTF-8 text/);
    assert.match(r.stderr, /translated 2 sentences \(1 failed\) in /);
    assert.not.match(r.stderr, /translated 3 sentences/);
    const out = r.stdout.split('\n');
    assert.is(out.length, 4, r.stdout);
    assert.is(out[1], '');
    assert.ok(out[0] !== '' && out[2] !== '');
    const ok = planc(['translate', plan], 'w3 w4\n\nw5\n');
    assert.is(ok.status, 0, ok.stderr);
    assert.match(ok.stderr, /translated 3 sentences in /);
  });

  test('inspect leaves out created when the plan records none, and shows it when SOURCE_DATE_EPOCH set it', () => {
    const r = planc(['inspect', plan]);
    assert.is(r.status, 0, r.stderr);
    assert.not.match(r.stdout, /created\s*[,)]/);
    const stamped = path.join(tmp, 'stamped.plan');
    const made = spawnSync(
      process.execPath,
      [
        path.join(REPO_ROOT, 'bin', 'planc.js'),
        'optimize',
        model,
        '-o',
        stamped,
        '--quiet',
        '--max-batch',
        '2',
        '--max-src-len',
        '8',
        '--max-tgt-len',
        '8',
      ],
      { encoding: 'utf8', env: { ...process.env, SOURCE_DATE_EPOCH: '1700000000' } },
    );
    assert.is(made.status, 0, made.stderr);
    assert.match(planc(['inspect', stamped]).stdout, /created 2023-11-14T22:13:20\.000Z\)/);
  });
}

test("npm: no project config npm does not know (onnxruntime-node's install is denied by package.json allowScripts)", () => {
  const npmrc = path.join(REPO_ROOT, '.npmrc');
  if (fs.existsSync(npmrc)) assert.not.match(fs.readFileSync(npmrc, 'utf8'), /onnxruntime-node-install/);
  const pkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
    allowScripts?: Record<string, boolean>;
  };
  assert.is(pkg.allowScripts?.['onnxruntime-node'], false);
});

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
