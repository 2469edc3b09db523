// Shape and position patterns of TorchScript seq2seq exports (M2M100/NLLB cumulative positions, BART offset positions
// after a past length, T5 relative buckets, HF causal masks): every size is a model symbol, and plans match onnxruntime.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ONNX_CODE } from '../compiler/dtype.ts';
import { inferModel } from '../model/infer/infer.ts';
import { importOnnxFile } from '../model/onnx/import-model.ts';
import type { OnnxTypes } from '../model/onnx/proto.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { dimStr } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { fromRt, toRt } from './reference/rt-tensors.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import { rng } from './reference/rng.ts';
import { buildModel, floatInit, type ModelSpec } from './helpers/onnx-build.ts';
import { ort, relErr, runOrt } from './helpers/ort.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-export-patterns-'));
const PAD = 1;

const ints = (name: string, values: number[], dims: number[] = [values.length]): OnnxTypes.ITensorProto => ({
  name,
  dims,
  dataType: ONNX_CODE.int64,
  rawData: new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer),
});
const floats = (name: string, values: number[], dims: number[] = [values.length]): OnnxTypes.ITensorProto =>
  floatInit(name, dims, values);
const table = (name: string, rows: number, cols: number, seed: number): OnnxTypes.ITensorProto => {
  const r = rng(seed);
  return floatInit(
    name,
    [rows, cols],
    Array.from({ length: rows * cols }, () => r() * 2 - 1),
  );
};

/** M2M100/NLLB: positions = cumsum over non-pad tokens (+ past length) times the mask, + pad; a table lookup. */
const M2M100: ModelSpec = {
  inputs: [['input_ids', 'int64', ['batch_size', 'sequence_length']]],
  outputs: [['pos_embeds', 'float32', ['batch_size', 'sequence_length', 8]]],
  initializers: [ints('pad', [PAD], []), ints('axis', [1], []), table('positions', 40, 8, 1)],
  nodes: [
    { op: 'Equal', inputs: ['input_ids', 'pad'], outputs: ['is_pad'] },
    { op: 'Not', inputs: ['is_pad'], outputs: ['not_pad'] },
    { op: 'Cast', inputs: ['not_pad'], outputs: ['mask'], attrs: [{ name: 'to', type: 2, i: ONNX_CODE.int32 }] },
    { op: 'CumSum', inputs: ['mask', 'axis'], outputs: ['cum'] },
    { op: 'Mul', inputs: ['cum', 'mask'], outputs: ['inc'] },
    { op: 'Cast', inputs: ['inc'], outputs: ['inc64'], attrs: [{ name: 'to', type: 2, i: ONNX_CODE.int64 }] },
    { op: 'Add', inputs: ['inc64', 'pad'], outputs: ['position_ids'] },
    { op: 'Gather', inputs: ['positions', 'position_ids'], outputs: ['pos_embeds'] },
  ],
};

/** BART/mBART: positions past_len .. past_len + T (past length from a cache input's shape) + offset 2. */
const BART: ModelSpec = {
  inputs: [
    ['input_ids', 'int64', ['batch_size', 'decoder_sequence_length']],
    ['past_key', 'float32', ['batch_size', 2, 'past_decoder_sequence_length', 4]],
  ],
  outputs: [['pos_embeds', 'float32', ['batch_size', 'decoder_sequence_length', 8]]],
  initializers: [
    ints('i0', [0], []),
    ints('i1', [1], []),
    ints('i2', [2], []),
    ints('offset', [2], []),
    ints('ax0', [0]),
    table('positions', 42, 8, 2),
  ],
  nodes: [
    { op: 'Shape', inputs: ['past_key'], outputs: ['pshape'] },
    { op: 'Gather', inputs: ['pshape', 'i2'], outputs: ['past_len'], attrs: [{ name: 'axis', type: 2, i: 0 }] },
    { op: 'Shape', inputs: ['input_ids'], outputs: ['ishape'] },
    { op: 'Gather', inputs: ['ishape', 'i1'], outputs: ['tgt_len'], attrs: [{ name: 'axis', type: 2, i: 0 }] },
    { op: 'Gather', inputs: ['ishape', 'i0'], outputs: ['bsz'], attrs: [{ name: 'axis', type: 2, i: 0 }] },
    { op: 'Add', inputs: ['past_len', 'tgt_len'], outputs: ['end'] },
    { op: 'Range', inputs: ['past_len', 'end', 'i1'], outputs: ['positions_1d'] },
    { op: 'Add', inputs: ['positions_1d', 'offset'], outputs: ['shifted'] },
    { op: 'Unsqueeze', inputs: ['shifted', 'ax0'], outputs: ['row'] },
    { op: 'Unsqueeze', inputs: ['bsz', 'ax0'], outputs: ['bsz1'] },
    { op: 'Unsqueeze', inputs: ['tgt_len', 'ax0'], outputs: ['tgt1'] },
    { op: 'Concat', inputs: ['bsz1', 'tgt1'], outputs: ['bt'], attrs: [{ name: 'axis', type: 2, i: 0 }] },
    { op: 'Expand', inputs: ['row', 'bt'], outputs: ['ids'] },
    { op: 'Gather', inputs: ['positions', 'ids'], outputs: ['pos_embeds'] },
  ],
};

/** T5: relative position buckets (bidirectional, 16 buckets, max distance 20) → a [1, H, q, k] bias. */
const T5: ModelSpec = {
  inputs: [['hidden', 'float32', ['batch_size', 'encoder_sequence_length', 8]]],
  outputs: [['bias', 'float32', [1, 2, 'encoder_sequence_length', 'encoder_sequence_length']]],
  initializers: [
    ints('i0', [0], []),
    ints('i1', [1], []),
    ints('ax0', [0]),
    ints('ax1', [1]),
    ints('half', [8], []),
    ints('max_exact', [4], []),
    ints('last', [7], []),
    floats('max_exact_f', [4], []),
    floats('log_ratio', [Math.log(20 / 4)], []),
    floats('span', [8 - 4], []),
    table('rel_bias', 16, 2, 3),
  ],
  nodes: [
    { op: 'Shape', inputs: ['hidden'], outputs: ['hs'] },
    { op: 'Gather', inputs: ['hs', 'i1'], outputs: ['len'], attrs: [{ name: 'axis', type: 2, i: 0 }] },
    { op: 'Range', inputs: ['i0', 'len', 'i1'], outputs: ['r'] },
    { op: 'Unsqueeze', inputs: ['r', 'ax1'], outputs: ['ctx'] },
    { op: 'Unsqueeze', inputs: ['r', 'ax0'], outputs: ['mem'] },
    { op: 'Sub', inputs: ['mem', 'ctx'], outputs: ['rel'] },
    { op: 'Greater', inputs: ['rel', 'i0'], outputs: ['pos'] },
    { op: 'Cast', inputs: ['pos'], outputs: ['pos64'], attrs: [{ name: 'to', type: 2, i: ONNX_CODE.int64 }] },
    { op: 'Mul', inputs: ['pos64', 'half'], outputs: ['base'] },
    { op: 'Abs', inputs: ['rel'], outputs: ['dist'] },
    { op: 'Less', inputs: ['dist', 'max_exact'], outputs: ['small'] },
    { op: 'Cast', inputs: ['dist'], outputs: ['distf'], attrs: [{ name: 'to', type: 2, i: ONNX_CODE.float32 }] },
    { op: 'Div', inputs: ['distf', 'max_exact_f'], outputs: ['q'] },
    { op: 'Log', inputs: ['q'], outputs: ['lq'] },
    { op: 'Div', inputs: ['lq', 'log_ratio'], outputs: ['frac'] },
    { op: 'Mul', inputs: ['frac', 'span'], outputs: ['scaled'] },
    { op: 'Cast', inputs: ['scaled'], outputs: ['scaled64'], attrs: [{ name: 'to', type: 2, i: ONNX_CODE.int64 }] },
    { op: 'Add', inputs: ['scaled64', 'max_exact'], outputs: ['large0'] },
    { op: 'Min', inputs: ['large0', 'last'], outputs: ['large'] },
    { op: 'Where', inputs: ['small', 'dist', 'large'], outputs: ['within'] },
    { op: 'Add', inputs: ['base', 'within'], outputs: ['bucket'] },
    { op: 'Gather', inputs: ['rel_bias', 'bucket'], outputs: ['qkh'] },
    { op: 'Transpose', inputs: ['qkh'], outputs: ['hqk'], attrs: [{ name: 'perm', type: 7, ints: [2, 0, 1] }] },
    { op: 'Unsqueeze', inputs: ['hqk', 'ax0'], outputs: ['bias'] },
  ],
};

function ids(b: number, s: number, seed: number): Tensor {
  const r = rng(seed);
  const data: number[] = [];
  for (let i = 0; i < b; i++) {
    const len = 1 + Math.floor(r() * s);
    for (let j = 0; j < s; j++) data.push(j < len ? 2 + Math.floor(r() * 30) : PAD);
  }
  return Tensor.fromNumbers('int64', [b, s], data);
}

const CASES: [string, ModelSpec, () => Record<string, Tensor>][] = [
  ['M2M100 cumulative positions', M2M100, () => ({ input_ids: ids(3, 7, 4) })],
  [
    'BART offset positions after the past length',
    BART,
    () => ({ input_ids: ids(2, 1, 5), past_key: Tensor.fromNumbers('float32', [2, 2, 5, 4], new Array(80).fill(0.5)) }),
  ],
  [
    'T5 relative position buckets',
    T5,
    () => ({ hidden: Tensor.fromNumbers('float32', [2, 30, 8], new Array(480).fill(0.25)) }),
  ],
];

for (const [name, spec, feeds] of CASES) {
  const file = path.join(tmp, `${name.split(' ')[0]}.onnx`);
  fs.writeFileSync(file, buildModel({ ...spec, opset: 18 }));

  test(`${name}: inference leaves only model symbols`, () => {
    const model = importOnnxFile(file);
    const facts = inferModel(model).get('main')!;
    const symbols = new Set(
      spec.inputs.flatMap(([, , dims]) => dims.filter((d): d is string => typeof d === 'string')),
    );
    for (const [v, f] of facts) {
      for (const d of [...(f.shape ?? []), ...(f.sym ?? [])]) {
        for (const s of dimStr(d).match(/[A-Za-z_][\w]*/g) ?? [])
          assert.ok(symbols.has(s), `'${v}' has dimension '${dimStr(d)}' (symbol '${s}' is not a model input's)`);
      }
    }
  });

  if (nativeAvailable()) {
    test(`${name}: the plan matches onnxruntime`, async () => {
      const built = buildPlan(importOnnxFile(file), { target: 'cpu', maxBatch: 4, maxSrcLen: 32, maxTgtLen: 32 });
      const plan = loadPlanBytes(encodePlan(built.header, built.blob), `${name}.plan`);
      const session = await ort.InferenceSession.create(file);
      try {
        const f = feeds();
        const want = await runOrt(session, f);
        const got = await plan.run('main', Object.fromEntries(Object.entries(f).map(([k, v]) => [k, toRt(v)])));
        for (const [k, w] of Object.entries(want)) {
          const g = fromRt(got[k]!);
          assert.equal([...g.dims], [...w.dims], `${k} dims`);
          assert.ok(relErr(g, w) < 1e-6, `${k}: relative error ${relErr(g, w)}`);
        }
      } finally {
        plan.close();
        await session.release();
      }
    });
  }
}

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
