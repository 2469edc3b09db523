// The plan file: magic, format version, header length and crc32, the protobuf header, then 64-byte-aligned weights.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { crc32 } from 'node:zlib';
import protobuf from 'protobufjs';
import { PlancError } from '../diagnostics.ts';
import { PLAN_FORMAT_VERSION, type PlanFile, type PlanHeader } from './types.ts';
import { validateHeader } from './validate.ts';

const MAGIC = Buffer.from('PLANCPLN', 'latin1');
const PREAMBLE = 24; // magic 8, format version 4, header length 4, header crc32 4, reserved 4
export const BLOB_ALIGN = 64;

const root = protobuf.loadSync(path.join(path.dirname(fileURLToPath(import.meta.url)), 'plan.proto'));
const PlanMsg = root.lookupType('planc.Plan');

export function align(n: number, a = BLOB_ALIGN): number {
  return Math.ceil(n / a) * a;
}

/** Serializes a plan: preamble, header, padding to 64, blob region. */
export function encodePlan(header: PlanHeader, blob: Uint8Array): Uint8Array {
  const h = { ...header, blobBytes: blob.length, blobCrc32: crc32(blob) >>> 0, formatVersion: PLAN_FORMAT_VERSION };
  const err = PlanMsg.verify(h);
  if (err) throw new Error(`internal: plan header does not fit the schema: ${err}`);
  const head = PlanMsg.encode(PlanMsg.fromObject(h)).finish();
  const blobStart = align(PREAMBLE + head.length);
  const out = new Uint8Array(blobStart + blob.length);
  const dv = new DataView(out.buffer);
  out.set(MAGIC, 0);
  dv.setUint32(8, PLAN_FORMAT_VERSION, true);
  dv.setUint32(12, head.length, true);
  dv.setUint32(16, crc32(head) >>> 0, true);
  out.set(head, PREAMBLE);
  out.set(blob, blobStart);
  return out;
}

export function writePlanFile(file: string, header: PlanHeader, blob: Uint8Array): number {
  const bytes = encodePlan(header, blob);
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, file);
  return bytes.length;
}

/** Decodes and fully validates a plan held in memory; `file` names it in errors. */
export function decodePlan(bytes: Uint8Array, file = '<plan>'): PlanFile {
  const bad = (msg: string): never => {
    throw new PlancError('PLANC_E401', msg, { file });
  };
  if (bytes.length < PREAMBLE) bad(`not a planc plan: ${bytes.length} bytes is shorter than the plan preamble`);
  if (!Buffer.from(bytes.subarray(0, 8)).equals(MAGIC))
    bad('not a planc plan (bad magic bytes); plans are written by `planc optimize`');
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = dv.getUint32(8, true);
  const headLen = dv.getUint32(12, true);
  if (version !== PLAN_FORMAT_VERSION) {
    const made = peekVersion(bytes, headLen);
    throw new PlancError(
      'PLANC_E402',
      `plan format version ${version}${made ? ` (made by planc ${made})` : ''} cannot be loaded by this planc, which reads format ${PLAN_FORMAT_VERSION}: re-run \`planc optimize\` with this planc`,
      { file },
    );
  }
  if (PREAMBLE + headLen > bytes.length)
    bad(
      `truncated plan: the header claims ${headLen} bytes but the file has ${bytes.length - PREAMBLE} after the preamble`,
    );
  const head = bytes.subarray(PREAMBLE, PREAMBLE + headLen);
  if (crc32(head) >>> 0 !== dv.getUint32(16, true)) bad('corrupt plan: header checksum mismatch');
  let header: PlanHeader;
  try {
    header = PlanMsg.toObject(PlanMsg.decode(head), {
      longs: Number,
      enums: Number,
      defaults: true,
      arrays: true,
      objects: true,
    }) as PlanHeader;
  } catch (e) {
    return bad(`corrupt plan header: ${(e as Error).message}`);
  }
  header.tokenizer = new Uint8Array(header.tokenizer ?? []);
  if (header.cuda) header.cuda.fatbin = new Uint8Array(header.cuda.fatbin ?? []);
  else delete header.cuda;
  if (!header.vocab) delete header.vocab;
  if (!header.quantization) delete header.quantization;
  if (!header.fast) delete header.fast;
  if (header.decoding && !header.decoding.hrt) delete header.decoding.hrt;
  const blobStart = align(PREAMBLE + headLen);
  if (blobStart + header.blobBytes !== bytes.length) {
    bad(
      `truncated or padded plan: header says ${header.blobBytes} bytes of weights at ${blobStart}, the file has ${bytes.length - blobStart}`,
    );
  }
  const blob = bytes.subarray(blobStart);
  if (crc32(blob) >>> 0 !== header.blobCrc32) bad('corrupt plan: weight data checksum mismatch');
  validateHeader(header, file);
  return { header, blob };
}

/** Reads and validates a plan file. */
export function readPlanFile(file: string): PlanFile {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', `no such plan file: ${file}`, { file });
  const size = fs.statSync(file).size;
  if (size > 2 ** 31 - 1)
    throw new PlancError('PLANC_E401', `plan of ${size} bytes is over the 2 GiB this planc loads`, { file });
  return decodePlan(fs.readFileSync(file), file);
}

/** The planc version recorded in a header, read leniently for error messages about other formats. */
function peekVersion(bytes: Uint8Array, headLen: number): string | undefined {
  try {
    const h = PlanMsg.decode(bytes.subarray(PREAMBLE, PREAMBLE + headLen)) as unknown as { plancVersion?: string };
    return h.plancVersion || undefined;
  } catch {
    return undefined;
  }
}
