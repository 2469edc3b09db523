// TensorProto ⇄ Tensor: every storage form (raw_data, typed fields, external data), float16/bfloat16, strings.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BYTES, dtypeFromOnnx, ONNX_CODE, onnxDtypeName, type DType } from '../../compiler/dtype.ts';
import { PlancError } from '../../compiler/diagnostics.ts';
import { bf16BitsToNumber, f16BitsToNumber, numberToBf16Bits, numberToF16Bits } from '../../compiler/float16.ts';
import { Tensor, sizeOf } from '../../compiler/tensor.ts';
import { num, onnx, type OnnxTypes } from './proto.ts';

type TP = OnnxTypes.ITensorProto;

/** Where a tensor comes from, for error messages and external-data lookup. */
export interface TensorSource {
  /** The .onnx (or .pb) file. */
  file: string;
  /** External data files already opened (path → descriptor and size), shared across graphs of a model. */
  external?: ExternalFiles;
}

/** Open external-data files. Tensors are read by offset, so data files may be larger than Node's 2 GiB buffer limit. */
export class ExternalFiles {
  private readonly open = new Map<string, { fd: number; size: number }>();
  get(file: string): { fd: number; size: number } {
    let f = this.open.get(file);
    if (!f) {
      const fd = fs.openSync(file, 'r');
      f = { fd, size: fs.fstatSync(fd).size };
      this.open.set(file, f);
    }
    return f;
  }
  close(): void {
    for (const f of this.open.values()) fs.closeSync(f.fd);
    this.open.clear();
  }
}

/** The raw little-endian bytes behind a tensor (raw_data or external data), or undefined for typed-field storage. */
export function rawBytesOf(tp: TP, src: TensorSource): Uint8Array | undefined {
  if (tp.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) return externalBytes(tp, src);
  if (tp.rawData && tp.rawData.length > 0) return tp.rawData;
  return undefined;
}

function externalBytes(tp: TP, src: TensorSource): Uint8Array {
  const kv = new Map((tp.externalData ?? []).map((e) => [e.key ?? '', e.value ?? '']));
  const loc = kv.get('location');
  const where = { file: src.file, node: tp.name ?? '' };
  if (!loc) throw new PlancError('PLANC_E007', `tensor '${tp.name}' has external data without a location`, where);
  if (path.isAbsolute(loc) || loc.split(/[\\/]/).includes('..')) {
    throw new PlancError('PLANC_E007', `tensor '${tp.name}' points outside the model folder: ${loc}`, where);
  }
  const full = path.join(path.dirname(src.file), loc);
  if (!fs.existsSync(full)) {
    throw new PlancError(
      'PLANC_E002',
      `external data file '${loc}' of tensor '${tp.name}' not found (looked for ${full})`,
      where,
    );
  }
  if (!fs.statSync(full).isFile()) {
    throw new PlancError(
      'PLANC_E002',
      `external data '${loc}' of tensor '${tp.name}' is not a file (${full} is a folder or a device)`,
      where,
    );
  }
  const files = src.external ?? new ExternalFiles();
  const { fd, size } = files.get(full);
  const offset = Number(kv.get('offset') ?? '0');
  const dtype = dtypeFromOnnx(tp.dataType ?? 0);
  const expected = dtype ? sizeOf((tp.dims ?? []).map(num)) * BYTES[dtype] : undefined;
  const length = kv.has('length') ? Number(kv.get('length')) : (expected ?? size - offset);
  if (!Number.isInteger(offset) || !Number.isInteger(length) || offset < 0 || length < 0 || offset + length > size) {
    throw new PlancError(
      'PLANC_E003',
      `tensor '${tp.name}' wants bytes ${offset}..${offset + length} of '${loc}', which has ${size}`,
      where,
    );
  }
  const out = new Uint8Array(length);
  let done = 0;
  while (done < length) {
    const n = fs.readSync(fd, out, done, Math.min(length - done, 1 << 30), offset + done);
    if (n <= 0) throw new PlancError('PLANC_E003', `could not read tensor '${tp.name}' from '${loc}'`, where);
    done += n;
  }
  if (!src.external) files.close();
  return out;
}

/** Decodes a TensorProto into a Tensor. */
export function tensorFromProto(tp: TP, src: TensorSource): Tensor {
  const code = tp.dataType ?? 0;
  const dtype = dtypeFromOnnx(code);
  const where = { file: src.file, node: tp.name ?? '' };
  if (!dtype)
    throw new PlancError(
      'PLANC_E004',
      `tensor '${tp.name}' has dtype ${onnxDtypeName(code)}, which planc does not support`,
      where,
    );
  const dims = (tp.dims ?? []).map(num);
  if (dims.some((d) => !Number.isInteger(d) || d < 0))
    throw new PlancError('PLANC_E007', `tensor '${tp.name}' has bad dims [${dims}]`, where);
  const n = sizeOf(dims);
  if (dtype === 'string') {
    const s = (tp.stringData ?? []).map((b) => Buffer.from(b).toString('utf8'));
    if (s.length !== n)
      throw new PlancError('PLANC_E007', `tensor '${tp.name}' has ${s.length} strings for dims [${dims}]`, where);
    return Tensor.fromStrings(dims, s);
  }
  const raw = rawBytesOf(tp, src);
  if (raw) {
    if (raw.length !== n * BYTES[dtype]) {
      throw new PlancError(
        'PLANC_E007',
        `tensor '${tp.name}' has ${raw.length} bytes of data, dims [${dims}] of ${dtype} need ${n * BYTES[dtype]}`,
        where,
      );
    }
    return fromRaw(dtype, dims, raw);
  }
  const values = typedFieldValues(tp, dtype);
  if (values.length !== n) {
    if (n === 0 && values.length === 0) return Tensor.zeros(dtype, dims);
    throw new PlancError(
      'PLANC_E007',
      `tensor '${tp.name}' has ${values.length} values for dims [${dims}] (${n} elements)`,
      where,
    );
  }
  return Tensor.fromNumbers(dtype, dims, values);
}

function typedFieldValues(tp: TP, dtype: DType): number[] {
  switch (dtype) {
    case 'float32':
      return tp.floatData ?? [];
    case 'float64':
      return tp.doubleData ?? [];
    case 'int64':
      return (tp.int64Data ?? []).map(num);
    case 'uint64':
      return (tp.uint64Data ?? []).map((x) =>
        typeof x === 'number' ? x : Number(BigInt.asUintN(64, BigInt(x.toString()))),
      );
    case 'uint32':
      return (tp.uint64Data ?? []).map(num);
    case 'float16':
      return (tp.int32Data ?? []).map(f16BitsToNumber);
    case 'bfloat16':
      return (tp.int32Data ?? []).map(bf16BitsToNumber);
    default:
      return tp.int32Data ?? []; // int32, int16, int8, uint16, uint8, bool
  }
}

/** Little-endian raw bytes → Tensor. */
export function fromRaw(dtype: DType, dims: number[], raw: Uint8Array): Tensor {
  const n = sizeOf(dims);
  const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const copy = (Ctor: { new (b: ArrayBuffer): ArrayLike<number> & { length: number } }) =>
    new Ctor(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength) as ArrayBuffer);
  switch (dtype) {
    case 'float32':
      return new Tensor(dtype, dims, copy(Float32Array) as Float32Array);
    case 'float64':
      return new Tensor(dtype, dims, copy(Float64Array) as Float64Array);
    case 'int32':
      return new Tensor(dtype, dims, copy(Int32Array) as Int32Array);
    case 'int16':
      return new Tensor(dtype, dims, copy(Int16Array) as Int16Array);
    case 'int8':
      return new Tensor(dtype, dims, copy(Int8Array) as Int8Array);
    case 'uint8':
      return new Tensor(dtype, dims, copy(Uint8Array) as Uint8Array);
    case 'uint16':
      return new Tensor(dtype, dims, copy(Uint16Array) as Uint16Array);
    case 'uint32':
      return new Tensor(dtype, dims, copy(Uint32Array) as Uint32Array);
    case 'bool':
      return Tensor.fromNumbers(dtype, dims, raw);
    case 'int64':
    case 'uint64': {
      const out = new Float64Array(n);
      for (let i = 0; i < n; i++)
        out[i] = Number(dtype === 'int64' ? dv.getBigInt64(i * 8, true) : dv.getBigUint64(i * 8, true));
      return new Tensor(dtype, dims, out);
    }
    case 'float16':
    case 'bfloat16': {
      const out = new Float32Array(n);
      const conv = dtype === 'float16' ? f16BitsToNumber : bf16BitsToNumber;
      for (let i = 0; i < n; i++) out[i] = conv(dv.getUint16(i * 2, true));
      return new Tensor(dtype, dims, out);
    }
    case 'string':
      throw new Error('internal: strings have no raw form');
  }
}

/** Tensor → little-endian raw bytes (the form planc writes to ONNX raw_data and to plans). */
export function toRaw(t: Tensor): Uint8Array {
  const n = t.size;
  const out = new Uint8Array(n * BYTES[t.dtype]);
  const dv = new DataView(out.buffer);
  const d = t.nums;
  switch (t.dtype) {
    case 'int64':
      for (let i = 0; i < n; i++) dv.setBigInt64(i * 8, clampI64(d[i]!), true);
      break;
    case 'uint64':
      for (let i = 0; i < n; i++) dv.setBigUint64(i * 8, BigInt.asUintN(64, BigInt(Math.trunc(d[i]!))), true);
      break;
    case 'float16':
      for (let i = 0; i < n; i++) dv.setUint16(i * 2, numberToF16Bits(d[i]!), true);
      break;
    case 'bfloat16':
      for (let i = 0; i < n; i++) dv.setUint16(i * 2, numberToBf16Bits(d[i]!), true);
      break;
    default:
      out.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
  }
  return out;
}

function clampI64(x: number): bigint {
  if (x >= 9223372036854775807) return 9223372036854775807n;
  if (x <= -9223372036854775808) return -9223372036854775808n;
  return BigInt(Math.trunc(x));
}

/** Tensor → TensorProto with raw_data (strings in string_data). */
export function tensorToProto(t: Tensor, name: string): OnnxTypes.TensorProto {
  const tp = new onnx.TensorProto({ name, dims: [...t.dims], dataType: ONNX_CODE[t.dtype] });
  if (t.dtype === 'string') tp.stringData = t.strings.map((s) => Buffer.from(s, 'utf8'));
  else tp.rawData = toRaw(t);
  return tp;
}
