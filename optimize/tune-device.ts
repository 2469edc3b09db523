// The device a tuning measurement belongs to: CPU model, the feature flags the kernels' paths depend on, the native
// build (SIMD level, BLAS) and its thread count. A cache entry of another device is foreign and never used.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { nativeInfo } from '../runtime/native.ts';

/** What the device is, in words (the report shows it) and as a short id (cache entries carry it). */
export interface TuneDevice {
  cpu: string;
  /** The CPU flags a kernel path may use (SIMD, FMA, VNNI, AMX), sorted. */
  flags: string[];
  cores: number;
  threads: number;
  blas: string;
  simd: string;
  /** sha256 prefix of the fields above. */
  id: string;
}

/** Flags that select kernel paths (gemm.cc, qgemm*.cc): the rest (virtualization, power) change no choice. */
const PATH_FLAG = /^(sse4_[12]|avx.*|fma|f16c|amx.*|.*vnni.*|bmi2)$/;

function cpuFlags(): string[] {
  try {
    const line = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '';
    return [...new Set(line.split(/\s+/).filter((f) => PATH_FLAG.test(f)))].sort();
  } catch {
    return []; // no /proc/cpuinfo (not Linux): the model name and the native build's own detection still tell devices apart
  }
}

/** This machine as a tuning device (loads the native addon). */
export function thisDevice(): TuneDevice {
  const info = nativeInfo();
  const facts = {
    cpu: os.cpus()[0]?.model?.trim() ?? 'unknown',
    flags: cpuFlags(),
    cores: os.cpus().length,
    threads: info.threads,
    blas: info.blas,
    simd: info.simd,
  };
  return { ...facts, id: createHash('sha256').update(JSON.stringify(facts)).digest('hex').slice(0, 16) };
}

/** One line: the device as the CLI and the report name it. */
export const deviceText = (d: TuneDevice): string =>
  `${d.cpu}, ${d.cores} cores, ${d.threads} threads, ${d.blas} BLAS, ${d.simd} [${d.id}]`;
