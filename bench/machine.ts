// Facts about the machine a benchmark ran on, recorded next to its numbers.
import * as os from 'node:os';

export function machineFacts(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    date: new Date().toISOString(),
    host: os.hostname(),
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    ...extra,
  };
}
