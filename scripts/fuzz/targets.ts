// The five fuzz targets: each turns (base, PRNG, index) into one case — the files it needs and the planc commands.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import onnxProto from 'onnx-proto';
import protobuf from 'protobufjs';
import { REPO_ROOT } from '../../compiler/paths.ts';
import { PROFILE, VOCAB, type Base } from './base.ts';
import {
  byteMutation,
  editArray,
  editNumber,
  editString,
  flipBits,
  int,
  overwrite,
  pick,
  treeMutation,
  truncate,
  type Rng,
} from './mutate.ts';
import type { Case, FileSpec, Step } from './runner.ts';

const { onnx } = onnxProto;
export const TARGETS = ['onnx', 'folder', 'plan', 'feeds', 'cli'] as const;
export type Target = (typeof TARGETS)[number];

const linkAll = (dir: string, files: string[], to: string, except: string[] = []): Record<string, FileSpec> =>
  Object.fromEntries(files.filter((f) => !except.includes(f)).map((f) => [`${to}/${f}`, { link: path.join(dir, f) }]));

/** optimize the case's model folder, then (if that worked) translate two lines of ids with the plan it wrote. */
function compileAndTranslate(model: string, profile = PROFILE, mustFail?: string): Step[] {
  return [
    { args: ['optimize', model, '-o', 'out.plan', ...profile], check: mustFail ? { mustFail } : {} },
    { args: ['translate', 'out.plan', '--ids'], stdin: 'ids.txt', check: { lines: 2 } },
  ];
}

// ---------------- onnx: one ONNX file of the model mutated (bytes, or a decoded field) ----------------

const ONNX_FILES = ['encoder_model.onnx', 'decoder_model.onnx', 'decoder_with_past_model.onnx'];
// biome-ignore lint/suspicious/noExplicitAny: plan headers decoded to plain objects, mutated by the fuzz mutators
type Obj = Record<string, any>;

function decodeOnnx(bytes: Uint8Array): Obj {
  return onnx.ModelProto.toObject(onnx.ModelProto.decode(bytes), {
    longs: Number,
    arrays: true,
    defaults: false,
  }) as Obj;
}
function encodeOnnx(m: Obj): Uint8Array {
  return onnx.ModelProto.encode(onnx.ModelProto.fromObject(m)).finish();
}

/** A structured ONNX edit: returns the description and, when the edit removes what decoding needs, why it must fail. */
function onnxEdit(m: Obj, r: Rng): { desc: string; mustFail?: string } {
  const g = m.graph as Obj;
  switch (int(r, 9)) {
    case 0: {
      const v = pick(r, [0, 1, 7, 12, 16, 18, 21, 99, 2 ** 31 - 1, 2 ** 31, -1]);
      (m.opsetImport ??= [{ version: 17 }])[0].version = v;
      return { desc: `opset version -> ${v}` };
    }
    case 1: {
      const o = pick(r, g.output as Obj[]);
      const old = o.name;
      o.name = pick(r, [
        `${old}_renamed`,
        '',
        (pick(r, g.output as Obj[]) as Obj).name,
        (pick(r, g.input as Obj[]) as Obj).name,
      ]);
      const needed = ['logits', 'last_hidden_state'].includes(old) && o.name !== old;
      return {
        desc: `graph output '${old}' renamed '${o.name}'`,
        ...(needed ? { mustFail: `the output '${old}' decoding needs is gone` } : {}),
      };
    }
    case 2: {
      const withAttr = (g.node as Obj[]).filter((n) => n.attribute?.length);
      if (!withAttr.length) return { desc: treeMutation(m, r) };
      const n = pick(r, withAttr);
      const a = pick(r, n.attribute as Obj[]);
      return {
        desc: `node '${n.name}' (${n.opType}) attribute ${a.name}: ${editNumber(a, r) ?? editArray(a, r) ?? 'unchanged'}`,
      };
    }
    case 3: {
      const t = pick(r, (g.initializer as Obj[]) ?? [{}]);
      const d = pick(r, ['dims', 'dataType', 'externalData']);
      if (d === 'dims' && t.dims?.length) {
        const i = int(r, t.dims.length);
        const old = t.dims[i];
        t.dims[i] = pick(r, [0, -1, old + 1, old * 2, 2 ** 31, 2 ** 40]);
        return { desc: `initializer '${t.name}' dims[${i}] ${old} -> ${t.dims[i]}` };
      }
      if (d === 'dataType') {
        const old = t.dataType;
        t.dataType = pick(r, [0, 2, 3, 6, 7, 8, 9, 10, 11, 16, 99]);
        return { desc: `initializer '${t.name}' dataType ${old} -> ${t.dataType}` };
      }
      if (t.externalData?.length) {
        const e = pick(r, t.externalData as Obj[]);
        const old = e.value;
        e.value =
          e.key === 'location'
            ? pick(r, ['missing.bin', '../../etc/passwd', '', '/dev/zero'])
            : String(pick(r, [-1, 1, 2 ** 40, Number(old) + 4, Number(old) * 2, 0]));
        return { desc: `initializer '${t.name}' external ${e.key} ${old} -> ${e.value}` };
      }
      return { desc: treeMutation(t, r) };
    }
    case 4: {
      const n = pick(r, g.node as Obj[]);
      const old = n.opType;
      n.opType = pick(r, [
        'Foo',
        '',
        'Add',
        'MatMul',
        'Softmax',
        'Reshape',
        'If',
        'Loop',
        (pick(r, g.node as Obj[]) as Obj).opType,
      ]);
      return { desc: `node '${n.name}' op ${old} -> ${n.opType}` };
    }
    case 5: {
      const nodes = g.node as Obj[];
      const i = int(r, nodes.length);
      if (r() < 0.5) {
        const [n] = nodes.splice(i, 1);
        return { desc: `node '${n!.name}' (${n!.opType}) removed` };
      }
      nodes.splice(i, 0, structuredClone(nodes[i]));
      return { desc: `node '${nodes[i]!.name}' duplicated` };
    }
    case 6: {
      const n = pick(r, g.node as Obj[]);
      const io = r() < 0.5 ? 'input' : 'output';
      if (!n[io]?.length) return { desc: treeMutation(m, r) };
      const k = int(r, n[io].length);
      const old = n[io][k];
      n[io][k] = pick(r, [
        '',
        'nowhere',
        (pick(r, g.node as Obj[]) as Obj).output?.[0] ?? 'x',
        (pick(r, g.input as Obj[]) as Obj).name,
      ]);
      return { desc: `node '${n.name}' ${io}[${k}] '${old}' -> '${n[io][k]}'` };
    }
    case 7: {
      const old = m.irVersion;
      m.irVersion = pick(r, [0, 1, 3, 10, 11, 99, -1]);
      return { desc: `ir_version ${old} -> ${m.irVersion}` };
    }
    default:
      return { desc: treeMutation(m, r) };
  }
}

function onnxCase(base: Base, r: Rng, index: number): Case {
  const zoo = base.zoo.length && r() < 0.15 ? pick(r, base.zoo) : undefined;
  const srcDir = zoo ? zoo.dir : base.model;
  const files = zoo ? zoo.files : base.modelFiles;
  const file = pick(r, ONNX_FILES);
  const bytes = new Uint8Array(fs.readFileSync(path.join(srcDir, file)));
  let out: Uint8Array;
  let desc: string;
  let mustFail: string | undefined;
  if (r() < 0.4) [out, desc] = byteMutation(bytes, r);
  else {
    const m = decodeOnnx(bytes);
    const e = onnxEdit(m, r);
    desc = e.desc;
    mustFail = e.mustFail;
    try {
      out = encodeOnnx(m);
    } catch (err) {
      [out, desc] = [flipBits(bytes, r), `bit flips (the edit ${desc} did not encode: ${(err as Error).message})`];
      mustFail = undefined;
    }
  }
  const caseFiles: Record<string, FileSpec> = {
    ...linkAll(srcDir, files, 'model', [file]),
    [`model/${file}`]: out,
    'ids.txt': base.ids,
  };
  const label = `${zoo ? `zoo ${zoo.name}` : 'synthetic'} ${file}: ${desc}`;
  if (!zoo && r() < 0.1)
    return {
      target: 'onnx',
      index,
      desc: label,
      files: caseFiles,
      steps: [{ args: ['inspect', `model/${file}`, '--json'] }],
    };
  const profile = zoo ? ['--max-batch', '1', '--max-src-len', '8', '--max-tgt-len', '8'] : PROFILE;
  return {
    target: 'onnx',
    index,
    desc: label,
    files: caseFiles,
    steps: compileAndTranslate('model', profile, mustFail),
  };
}

// ---------------- folder: files renamed, missing, swapped; config.json / generation_config.json edited ----------------

const WEIRD = [null, -1, 0, 1, 2 ** 31, 2 ** 40, 1.5, 'x', '', true, [], {}, [1, 2], 1e308, -0.0];
const CONFIG_KEYS = [
  'vocab_size',
  'decoder_vocab_size',
  'd_model',
  'encoder_layers',
  'decoder_layers',
  'encoder_attention_heads',
  'decoder_attention_heads',
  'max_position_embeddings',
  'decoder_start_token_id',
  'eos_token_id',
  'pad_token_id',
  'unk_token_id',
  'forced_eos_token_id',
  'model_type',
  'architectures',
  'is_encoder_decoder',
  'scale_embedding',
  'normalize_before',
  'activation_function',
  'tie_word_embeddings',
  'share_encoder_decoder_embeddings',
];
const GEN_KEYS = [
  'num_beams',
  'max_length',
  'max_new_tokens',
  'min_length',
  'eos_token_id',
  'pad_token_id',
  'decoder_start_token_id',
  'forced_bos_token_id',
  'forced_eos_token_id',
  'bad_words_ids',
  'no_repeat_ngram_size',
  'length_penalty',
  'repetition_penalty',
  'early_stopping',
  'do_sample',
  'suppress_tokens',
  'begin_suppress_tokens',
];
const ID_KEYS = [
  'decoder_start_token_id',
  'eos_token_id',
  'pad_token_id',
  'forced_eos_token_id',
  'forced_bos_token_id',
];

/** A token id outside the vocabulary given where an id is expected: must be refused. */
const badId = (key: string, v: unknown) =>
  ID_KEYS.includes(key) &&
  typeof v === 'number' &&
  Number.isInteger(v) &&
  (v < 0 || v >= VOCAB) &&
  !(key === 'forced_bos_token_id' && v === -1);

function folderCase(base: Base, r: Rng, index: number): Case {
  const files: Record<string, FileSpec> = { ...linkAll(base.model, base.modelFiles, 'model'), 'ids.txt': base.ids };
  const config = JSON.parse(fs.readFileSync(path.join(base.model, 'config.json'), 'utf8'));
  const descs: string[] = [];
  let mustFail: string | undefined;
  const edits = 1 + (r() < 0.3 ? int(r, 3) : 0);
  for (let e = 0; e < edits; e++) {
    const names = Object.keys(files)
      .filter((f) => f.startsWith('model/'))
      .map((f) => f.slice(6));
    const f = pick(r, names);
    switch (int(r, 10)) {
      case 0:
        delete files[`model/${f}`];
        descs.push(`${f} missing`);
        break;
      case 1: {
        const to = pick(r, [
          'encoder.onnx',
          'model.onnx',
          'ENCODER_MODEL.onnx',
          'decoder_model_merged.onnx',
          `${f}.bak`,
          'weights.bin',
          'config.json',
          'tokenizer.json',
          'generation_config.json',
        ]);
        files[`model/${to}`] = files[`model/${f}`]!;
        if (to !== f) delete files[`model/${f}`];
        descs.push(`${f} renamed ${to}`);
        break;
      }
      case 2: {
        const g = pick(r, names);
        [files[`model/${f}`], files[`model/${g}`]] = [files[`model/${g}`]!, files[`model/${f}`]!];
        descs.push(`${f} and ${g} swapped`);
        break;
      }
      case 3: {
        const src = files[`model/${f}`]!;
        const bytes =
          src instanceof Uint8Array
            ? src
            : typeof src === 'string'
              ? new TextEncoder().encode(src)
              : 'link' in src
                ? new Uint8Array(fs.readFileSync(src.link))
                : new Uint8Array(0); // a folder: nothing to cut
        const [out, d] = r() < 0.5 ? [truncate(bytes, r), 'truncated'] : [overwrite(bytes, r), 'bytes overwritten'];
        files[`model/${f}`] = out;
        descs.push(`${f} ${d}`);
        break;
      }
      case 4:
        files[`model/${f}`] = { dir: true };
        descs.push(`${f} is a folder`);
        break;
      case 5:
        files[`model/${f}`] = new Uint8Array(0);
        descs.push(`${f} empty`);
        break;
      case 6:
      case 7: {
        const key = pick(r, CONFIG_KEYS);
        const mode = int(r, 3);
        if (mode === 0) {
          delete config[key];
          descs.push(`config.json: ${key} deleted`);
        } else {
          const v =
            mode === 1
              ? pick(r, WEIRD)
              : typeof config[key] === 'number'
                ? pick(r, [config[key] + 1, config[key] - 1, VOCAB, VOCAB + 1, 1000, 3])
                : pick(r, WEIRD);
          config[key] = v;
          descs.push(`config.json: ${key} = ${JSON.stringify(v)}`);
          if (badId(key, v)) mustFail = `config.json ${key} ${v} is not a token id of a ${VOCAB}-token vocabulary`;
        }
        files['model/config.json'] = JSON.stringify(config, null, 2);
        break;
      }
      case 8: {
        const text = pick(r, [
          '',
          '{',
          'null',
          '[]',
          '"x"',
          '{"vocab_size": 50,}',
          '\uFEFF{}',
          JSON.stringify(config).slice(0, 100),
        ]);
        files[`model/${pick(r, ['config.json', 'generation_config.json'])}`] = text;
        descs.push(`a json file is ${JSON.stringify(text).slice(0, 30)}`);
        break;
      }
      default: {
        const gen: Record<string, unknown> = {
          decoder_start_token_id: 0,
          eos_token_id: 0,
          pad_token_id: 0,
          max_length: 8,
          num_beams: 1,
        };
        for (let k = 0; k < 1 + int(r, 3); k++) {
          const key = pick(r, GEN_KEYS);
          const v =
            r() < 0.5 ? pick(r, WEIRD) : pick(r, [VOCAB, VOCAB - 1, 2, 4, 1000, [0, 1000], [[1, 2], [3]], [[]], [-1]]);
          gen[key] = v;
          descs.push(`generation_config.json: ${key} = ${JSON.stringify(v)}`);
          if (badId(key, v))
            mustFail = `generation_config.json ${key} ${v} is not a token id of a ${VOCAB}-token vocabulary`;
        }
        files['model/generation_config.json'] = JSON.stringify(gen);
      }
    }
  }
  return {
    target: 'folder',
    index,
    desc: descs.join('; '),
    files,
    steps: compileAndTranslate('model', PROFILE, mustFail),
  };
}

// ---------------- plan: header and blob mutations, some with their checksums recomputed ----------------

let PlanMsg: protobuf.Type | undefined;
const planType = () =>
  (PlanMsg ??= protobuf.loadSync(path.join(REPO_ROOT, 'compiler', 'plan', 'plan.proto')).lookupType('planc.Plan'));

function planParts(b: Uint8Array) {
  const headLen = new DataView(b.buffer, b.byteOffset).getUint32(12, true);
  const start = Math.ceil((24 + headLen) / 64) * 64;
  return { headLen, head: b.subarray(24, 24 + headLen), blob: b.subarray(start) };
}

/** Re-encodes a header with fresh checksums (header crc, and the blob's), so the edit reaches the validator. */
function reencodePlan(good: Uint8Array, header: Obj, blob: Uint8Array, fixBlobCrc: boolean): Uint8Array {
  const T = planType();
  if (fixBlobCrc) header.blobCrc32 = crc32(blob) >>> 0;
  const head = T.encode(T.fromObject(header)).finish();
  const start = Math.ceil((24 + head.length) / 64) * 64;
  const out = new Uint8Array(start + blob.length);
  out.set(good.subarray(0, 24));
  const dv = new DataView(out.buffer);
  dv.setUint32(12, head.length, true);
  dv.setUint32(16, crc32(head) >>> 0, true);
  out.set(head, 24);
  out.set(blob, start);
  return out;
}

function planCase(base: Base, r: Rng, index: number): Case {
  const good = base.planBytes;
  const { headLen, blob } = planParts(good);
  const header = () =>
    planType().toObject(planType().decode(planParts(good).head), {
      longs: Number,
      arrays: true,
      defaults: true,
      bytes: Array,
    }) as Obj;
  let bytes: Uint8Array;
  let desc: string;
  let finite = true;
  let mustFail: string | undefined;
  const kind = int(r, 12);
  if (kind === 0) {
    bytes = truncate(good, r);
    desc = `truncated to ${bytes.length} of ${good.length} bytes`;
  } else if (kind === 1) {
    bytes = flipBits(good, r);
    desc = 'bit flips anywhere (checksums left)';
  } else if (kind === 2) {
    bytes = good.slice();
    const field = pick(r, [8, 12, 16, 20]);
    const v = pick(r, [0, 1, 0xffffffff, headLen + 1, headLen - 1, good.length, 2 ** 31]);
    new DataView(bytes.buffer).setUint32(field, v, true);
    desc = `preamble field at byte ${field} = ${v}`;
  } else if (kind === 3) {
    bytes = flipBits(good, r, 1 + int(r, 4), 24, 24 + headLen);
    new DataView(bytes.buffer).setUint32(16, crc32(bytes.subarray(24, 24 + headLen)) >>> 0, true);
    desc = 'header bit flips, header checksum recomputed';
  } else if (kind === 4) {
    const b2 = r() < 0.5 ? flipBits(blob, r) : overwrite(blob, r);
    bytes = reencodePlan(good, header(), b2, true);
    desc = 'weight bytes changed, blob checksum recomputed';
    finite = false; // changed weights may legitimately give NaN
  } else {
    const h = header();
    if (kind <= 6) desc = `header ${editNumber(h, r)}`;
    else if (kind === 7) desc = `header ${editString(h, r)}`;
    else if (kind === 8) desc = `header ${editArray(h, r)}`;
    else if (kind === 9) {
      // a float of the header made non-finite (attention scales, epsilons, quantization scales are doubles)
      const d = editNumber(h, r, () => pick(r, [NaN, Infinity, -Infinity]));
      desc = `header ${d}`;
      if (d && /fargs|scale|eps/i.test(d)) mustFail = 'a kernel argument of the plan is not finite';
    } else if (kind === 10) {
      // an output translation needs removed or pointed at another tensor
      const p = pick(r, h.programs as Obj[]);
      const o = pick(r, p.outputs as Obj[]);
      let changed = true;
      if (r() < 0.5) {
        p.outputs = (p.outputs as Obj[]).filter((x) => x !== o);
        desc = `program ${p.graph}: output ${o.name} removed`;
      } else {
        const old = o.tensor;
        o.tensor = pick(r, [0, old + 1, old - 1, (p.tensors as Obj[]).length - 1, (p.tensors as Obj[]).length]);
        desc = `program ${p.graph}: output ${o.name} tensor ${old} -> ${o.tensor}`;
        changed = o.tensor === (p.tensors as Obj[]).length;
      }
      // removed, or pointing past the tensors: must be refused (pointing at another tensor of the same kind cannot be told)
      if (changed && (['logits', 'last_hidden_state'].includes(o.name) || /^present/.test(o.name)))
        mustFail = `the plan's ${p.graph} output ${o.name} is gone or points elsewhere`;
    } else {
      const p = pick(r, h.programs as Obj[]);
      const k = pick(r, p.kernels as Obj[]);
      desc = `program ${p.graph} kernel ${k.name}: ${treeMutation(k, r)}`;
    }
    try {
      bytes = reencodePlan(good, h, blob, false);
    } catch (e) {
      bytes = flipBits(good, r);
      desc = `bit flips (the edit ${desc} did not encode: ${(e as Error).message})`;
      mustFail = undefined;
    }
  }
  const files: Record<string, FileSpec> = { 'mut.plan': bytes, 'ids.txt': base.ids };
  let steps: Step[];
  if (r() < 0.5) {
    const graph = pick(r, Object.keys(base.feeds));
    files[`feeds.${graph}.json`] = { link: path.join(base.dir, `feeds.${graph}.json`) };
    // translate does not run decoder_with_past's outputs through run's output check: an output that vanished fails here
    steps = [
      {
        args: ['run', 'mut.plan', '--graph', graph, '--inputs', `feeds.${graph}.json`, '--json'],
        check: { outputs: base.outputs[graph]!, finite, ...(mustFail ? { mustFail } : {}) },
      },
    ];
  } else
    steps = [
      {
        args: ['translate', 'mut.plan', '--ids'],
        stdin: 'ids.txt',
        check: { lines: 2, ...(mustFail ? { mustFail } : {}) },
      },
    ];
  return { target: 'plan', index, desc, files, steps };
}

// ---------------- feeds: feeds.json for `planc run` with wrong dtypes, shapes, values, nesting ----------------

const deep = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`;

function feedsCase(base: Base, r: Rng, index: number): Case {
  const graph = pick(r, Object.keys(base.feeds));
  const feeds = structuredClone(base.feeds[graph]!) as Obj;
  const names = Object.keys(feeds);
  const name = pick(r, names);
  let text: string | undefined;
  let desc: string;
  let mustFail: string | undefined;
  let finite = true; // false where huge float feeds may overflow to Inf/NaN legitimately
  const isId = name === 'input_ids';
  const isMask = /attention_mask/.test(name);
  const flat = (v: unknown): unknown[] => (Array.isArray(v) ? v.flat(Infinity) : [v]);
  const setAll = (v: unknown, f: (x: unknown, i: number) => unknown): unknown => {
    let i = 0;
    const go = (x: unknown): unknown => (Array.isArray(x) ? x.map(go) : f(x, i++));
    return go(v);
  };
  switch (int(r, 12)) {
    case 0: {
      // a value out of range for what the input means
      const n = flat(feeds[name]).length;
      const at = int(r, n);
      const v = isId
        ? pick(r, [-1, VOCAB, VOCAB + 7, 2 ** 31, 2 ** 53, -(2 ** 31)])
        : isMask
          ? pick(r, [2, -1, 7, 255])
          : name === 'past_sequence_length'
            ? pick(r, [-1, 8, 9, 100, 2 ** 40])
            : pick(r, [1e38, -1e38, 3e38 * 10, 1e-45]);
      feeds[name] = setAll(feeds[name], (x, i) => (i === at ? v : x));
      desc = `${graph} ${name}[${at}] = ${v}`;
      if (!isId && !isMask && name !== 'past_sequence_length') finite = false;
      if (isId && (v < 0 || v >= VOCAB)) mustFail = `token id ${v} is outside the ${VOCAB}-token vocabulary`;
      if (isMask) mustFail = `attention mask value ${v} is not 0 or 1`;
      if (name === 'past_sequence_length' && (v < 0 || v > 8))
        mustFail = `past_sequence_length ${v} is outside the cache`;
      break;
    }
    case 1: {
      // a non-number value
      const n = flat(feeds[name]).length;
      const at = int(r, n);
      const v = pick(r, [null, 'x', '3', true, false, 1.5, -0.5, [], {}, [1], 1e400]);
      feeds[name] = setAll(feeds[name], (x, i) => (i === at ? v : x));
      desc = `${graph} ${name}[${at}] = ${JSON.stringify(v)}`;
      if (v === null || typeof v === 'string' || (typeof v === 'object' && !(Array.isArray(v) && v.length === 1)))
        mustFail = `feed value ${JSON.stringify(v)} is not a number`;
      if ((isId || isMask || name === 'past_sequence_length') && typeof v === 'number' && !Number.isInteger(v))
        mustFail = `integer feed ${name} given ${v}`;
      if (Array.isArray(v) && v.length === 0) mustFail = 'a ragged array';
      if (Array.isArray(v) && v.length === 1 && flat(feeds[name]).length > 1) mustFail = 'a ragged array';
      break;
    }
    case 2: {
      // the object form with a wrong dtype or dims
      const data = flat(feeds[name]);
      const dtype = pick(r, [
        'float32',
        'int64',
        'int32',
        'float16',
        'bool',
        'uint8',
        'string',
        'float64',
        'bogus',
        '',
      ]);
      const dims = pick(r, [
        [data.length],
        [1, data.length],
        [data.length, 1],
        [0],
        [],
        [-1, data.length],
        [1, 1, data.length],
        [2 ** 31, 1],
        [data.length + 1],
      ]);
      feeds[name] = { dtype, dims, data };
      desc = `${graph} ${name} = {dtype: ${dtype}, dims: [${dims}], data: ${data.length} values}`;
      if (dims.reduce((a, b) => a * b, 1) !== data.length || dims.some((d) => d < 0))
        mustFail = `dims [${dims}] do not hold ${data.length} values`;
      if (['string', 'bogus', ''].includes(dtype)) mustFail = `dtype '${dtype}'`;
      break;
    }
    case 3: {
      // ragged or re-nested
      const v = feeds[name];
      const mode = int(r, 4);
      if (mode === 0 && Array.isArray(v) && Array.isArray(v[0])) {
        (v[0] as unknown[]).pop();
        feeds[name] = [v[0], [...(v[0] as unknown[]), 0]];
        desc = `${graph} ${name} ragged rows`;
        mustFail = 'a ragged array';
      } else if (mode === 1) {
        feeds[name] = [v];
        desc = `${graph} ${name} one level deeper`;
      } else if (mode === 2) {
        feeds[name] = flat(v);
        desc = `${graph} ${name} flattened`;
      } else {
        feeds[name] = flat(v)[0];
        desc = `${graph} ${name} a scalar`;
      }
      break;
    }
    case 4: {
      // batch or length past the plan's profile
      const v = feeds[name];
      if (Array.isArray(v) && Array.isArray(v[0])) {
        const row = v[0] as unknown[];
        const mode = int(r, 3);
        if (mode === 0) {
          feeds[name] = [row, row, row];
          desc = `${graph} ${name} batch 3 (plan max 2)`;
        } else if (mode === 1) {
          feeds[name] = [Array.from({ length: 9 }, (_, i) => row[i % row.length])];
          desc = `${graph} ${name} length 9`;
        } else {
          feeds[name] = [[]];
          desc = `${graph} ${name} length 0`;
        }
      } else {
        feeds[name] = [v, v];
        desc = `${graph} ${name} doubled`;
      }
      break;
    }
    case 5: {
      delete feeds[name];
      desc = `${graph} ${name} missing`;
      mustFail = `input ${name} is missing`;
      break;
    }
    case 6: {
      feeds[pick(r, ['extra', 'input_ids ', 'INPUT_IDS', ''])] = [[1]];
      desc = `${graph} an unknown input added`;
      break;
    }
    case 7: {
      text = pick(r, [
        'null',
        '[]',
        '1',
        '"x"',
        '{}',
        '[[1,2]]',
        'true',
        '{"input_ids": null}',
        '{"input_ids": {}}',
        '{"input_ids": {"dims": [1], "data": null}}',
      ]);
      desc = `feeds file is ${text}`;
      break;
    }
    case 8: {
      text = `{"${name}": ${deep(pick(r, [100, 1000, 10000, 200000]))}}`;
      desc = `${graph} ${name} nested ${(text.length / 2) | 0} levels`;
      break;
    }
    case 9: {
      // bytes of the JSON text
      const b = new TextEncoder().encode(JSON.stringify(feeds));
      const [out, d] = byteMutation(b, r);
      text = Buffer.from(out).toString('latin1');
      desc = `${graph} feeds text: ${d}`;
      break;
    }
    case 10: {
      // every value of one input at an edge
      const v = isId ? pick(r, [0, VOCAB - 1, -1]) : isMask ? pick(r, [0, 2]) : pick(r, [0, 1e30, -1e30]);
      feeds[name] = setAll(feeds[name], () => v);
      desc = `${graph} ${name} all ${v}`;
      if (!isId && !isMask) finite = false;
      if (isId && v === -1) mustFail = 'token id -1';
      if (isMask && v === 2) mustFail = 'attention mask value 2';
      break;
    }
    default: {
      // two inputs disagree on a shared dimension
      const other = names.find(
        (n) => n !== name && Array.isArray(feeds[n]) && Array.isArray((feeds[n] as unknown[])[0]),
      );
      const v = feeds[name];
      if (other && Array.isArray(v) && Array.isArray(v[0])) {
        feeds[name] = [(v[0] as unknown[]).slice(0, Math.max(1, (v[0] as unknown[]).length - 1))];
        desc = `${graph} ${name} shorter than ${other}`;
      } else {
        desc = `${graph} ${treeMutation(feeds, r)}`;
      }
    }
  }
  const files: Record<string, FileSpec> = {
    'base.plan': { link: base.plan },
    'feeds.json': text ?? JSON.stringify(feeds),
  };
  return {
    target: 'feeds',
    index,
    desc,
    files,
    steps: [
      {
        args: ['run', 'base.plan', '--graph', graph, '--inputs', 'feeds.json', '--json'],
        check: { outputs: base.outputs[graph]!, finite, ...(mustFail ? { mustFail } : {}) },
      },
    ],
  };
}

// ---------------- cli: argument mutations of every command ----------------

const FLAG_VALUES = [
  '-1',
  '0',
  '1',
  '2',
  '3',
  '999',
  '1099511627776',
  'NaN',
  '',
  'abc',
  '1e3',
  '0x10',
  '1.5',
  ' 2',
  '--json',
  '-',
];
const EXTRA_FLAGS = [
  '--threads',
  '--batch',
  '--beam',
  '--max-length',
  '--strategy',
  '--jacobi-block',
  '--n-best',
  '--topk',
  '--quantize',
  '--max-dim',
  '--step-tokens',
  '--target-lang',
  '--device',
  '--max-batch',
  '--max-src-len',
  '--max-tgt-len',
  '--graph',
  '--inputs',
  '--output',
  '-o',
  '--json',
  '--full',
  '--truncate',
  '--ids',
  '--scores',
  '--quiet',
  '--debug',
  '--help',
  '--version',
  '--no-fuse',
  '--explain',
  '--dump-after',
  '--vocab',
  '--eos-id',
  '--input',
];

function cliCase(base: Base, r: Rng, index: number): Case {
  const templates: { args: string[]; stdin?: boolean; lines?: number }[] = [
    { args: ['translate', 'base.plan', '--ids'], stdin: true, lines: 2 },
    {
      args: ['translate', 'base.plan', '--ids', '--strategy', 'beam', '--beam', '2', '--batch', '2'],
      stdin: true,
      lines: 2,
    },
    { args: ['translate', 'base.plan', '--ids', '--max-length', '4', '--n-best', '2', '--beam', '2'], stdin: true },
    { args: ['run', 'base.plan', '--graph', 'encoder', '--inputs', 'feeds.json', '--json'] },
    { args: ['inspect', 'base.plan', '--json'] },
    { args: ['inspect', 'model'] },
    { args: ['report', 'base.plan', '--json'] },
    { args: ['optimize', 'model', '-o', 'out.plan', ...PROFILE] },
  ];
  const t = pick(r, templates);
  const args = [...t.args];
  const descs: string[] = [];
  let stdin = base.ids;
  let mustFail: string | undefined;
  let lines = t.lines;
  for (let e = 0; e < 1 + int(r, 2); e++) {
    switch (int(r, 8)) {
      case 0: {
        // a value replaced
        const vals = args.map((a, i) => [a, i] as const).filter(([a, i]) => i > 1 && !a.startsWith('-'));
        if (!vals.length) break;
        const [, i] = pick(r, vals);
        const v = pick(r, FLAG_VALUES);
        descs.push(`${args[i - 1]} ${JSON.stringify(args[i])} -> ${JSON.stringify(v)}`);
        args[i] = v;
        lines = undefined;
        break;
      }
      case 1: {
        const f = pick(r, EXTRA_FLAGS);
        const v = pick(r, [
          ...FLAG_VALUES,
          'greedy',
          'pgj',
          'beam',
          'int8',
          'sim',
          'tpu',
          'batch_size=0',
          'x=1',
          'all',
        ]);
        args.push(f, v);
        descs.push(`added ${f} ${JSON.stringify(v)}`);
        lines = undefined;
        break;
      }
      case 2: {
        const f = pick(r, EXTRA_FLAGS);
        args.push(f);
        descs.push(`added ${f} without a value`);
        lines = undefined;
        break;
      }
      case 3: {
        const f = `--${pick(r, ['bogus', 'max_batch', 'Threads', 'beams', 'x'])}`;
        args.push(f, '1');
        descs.push(`unknown flag ${f}`);
        mustFail = `unknown flag ${f}`;
        break;
      }
      case 4: {
        if (args.length > 2) {
          const i = 1 + int(r, args.length - 1);
          descs.push(`argument ${JSON.stringify(args[i])} removed`);
          args.splice(i, 1);
          lines = undefined;
        }
        break;
      }
      case 5: {
        args.splice(1, 0, pick(r, ['extra', 'base.plan', 'model', '/nonexistent', '']));
        descs.push(`positional ${JSON.stringify(args[1])} added`);
        lines = undefined;
        break;
      }
      case 6: {
        // standard input
        stdin = pick(r, [
          '',
          '\n\n\n',
          '3 4 5',
          'a b c\n',
          '-1 4\n',
          `${VOCAB} 3\n`,
          '99999999999999999999\n',
          `${'3 '.repeat(20)}\n`,
          '\xff\xfe\n',
          '3\t4\n5\r\n',
          ' 3  4 \n',
        ]);
        descs.push(`stdin ${JSON.stringify(stdin)}`);
        lines = undefined;
        break;
      }
      default: {
        const i = 1 + int(r, args.length - 1);
        const j = 1 + int(r, args.length - 1);
        [args[i], args[j]] = [args[j]!, args[i]!];
        descs.push(`arguments ${i} and ${j} swapped`);
        lines = undefined;
      }
    }
  }
  if (args.some((a) => ['--help', '-h', '--version'].includes(a))) mustFail = undefined; // help wins over a bad flag
  const files: Record<string, FileSpec> = {
    'base.plan': { link: base.plan },
    'feeds.json': { link: path.join(base.dir, 'feeds.encoder.json') },
    'stdin.txt': Buffer.from(stdin, 'latin1'),
    ...linkAll(base.model, base.modelFiles, 'model'),
  };
  return {
    target: 'cli',
    index,
    desc: `planc ${t.args.join(' ')}: ${descs.join('; ') || 'unchanged'}`,
    files,
    steps: [
      {
        args,
        stdin: 'stdin.txt',
        check: { ...(lines !== undefined ? { lines } : {}), ...(mustFail ? { mustFail } : {}) },
      },
    ],
  };
}

export function makeCase(target: Target, base: Base, r: Rng, index: number): Case {
  switch (target) {
    case 'onnx':
      return onnxCase(base, r, index);
    case 'folder':
      return folderCase(base, r, index);
    case 'plan':
      return planCase(base, r, index);
    case 'feeds':
      return feedsCase(base, r, index);
    default:
      return cliCase(base, r, index);
  }
}
