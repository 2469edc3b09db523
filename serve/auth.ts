// API keys for planc serve: Bearer tokens read from a file (one a line), compared in constant time; loopback checks.
import { createHash, timingSafeEqual } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { PlancError } from '../compiler/diagnostics.ts';

/** Whether a listen address reaches only this machine: localhost, 127.0.0.0/8 or ::1. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost') return true;
  if (net.isIPv4(h)) return h.startsWith('127.');
  if (net.isIPv6(h)) return h === '::1' || /^::ffff:127\./.test(h);
  return false;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** The keys of a key file: one per line, blank lines and lines starting with # ignored; at least one, each ≥ 16 characters. */
export function readApiKeys(file: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new PlancError(
      'PLANC_E006',
      (opt) =>
        `${opt('apiKeyFile')} ${file}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      { file },
    );
  }
  const keys = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  if (keys.length === 0)
    throw new PlancError('PLANC_E302', (opt) => `${opt('apiKeyFile')} ${file} holds no key (one key a line)`, { file });
  const short = keys.findIndex((k) => k.length < 16);
  if (short >= 0)
    throw new PlancError(
      'PLANC_E302',
      (opt) =>
        `${opt('apiKeyFile')} ${file}: key ${short + 1} has ${keys[short]!.length} characters; use at least 16 (e.g. openssl rand -hex 32)`,
      { file },
    );
  return keys;
}

/** A checker of `Authorization: Bearer KEY` headers: every key is compared (by SHA-256, in constant time), none short-circuits. */
export function bearerChecker(keys: string[]): (header: string | undefined) => boolean {
  const want = keys.map(digest);
  return (header) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    const got = digest(m ? m[1]! : '');
    let ok = false;
    for (const w of want) ok = timingSafeEqual(w, got) || ok;
    return ok && m !== null;
  };
}
