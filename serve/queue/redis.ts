// The Redis behind the job queue: a --redis URL checked and turned into BullMQ's connection options, and one ping
// at start so a truncated URL, a refused connection or a wrong password is a named error, not endless reconnects.
import { Redis, type RedisOptions } from 'ioredis';
import { PlancError } from '../../compiler/diagnostics.ts';

/** redis://[user:password@]host:port[/db] (rediss:// for TLS) as connection options; anything else is PLANC_E708. */
export function redisOptions(url: string): RedisOptions {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new PlancError(
      'PLANC_E708',
      (opt) => `${opt('redis')} ${safeUrl(url)}: not a URL; want redis://[user:password@]host:port[/db]`,
    );
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:')
    throw new PlancError(
      'PLANC_E708',
      (opt) =>
        `${opt('redis')} ${safeUrl(url)}: the scheme is ${u.protocol.replace(/:$/, '')}; want redis:// or rediss://`,
    );
  if (!u.hostname)
    throw new PlancError('PLANC_E708', (opt) => `${opt('redis')} ${safeUrl(url)}: no host; want redis://host:port`);
  if (!u.port && /:\/\/[^/]*:(\/|$)/.test(url))
    throw new PlancError(
      'PLANC_E708',
      (opt) => `${opt('redis')} ${safeUrl(url)}: the port is empty; want redis://host:port`,
    );
  const db = u.pathname.replace(/^\//, '');
  if (db !== '' && !/^\d{1,2}$/.test(db))
    throw new PlancError('PLANC_E708', (opt) => `${opt('redis')} ${safeUrl(url)}: '/${db}' is not a database number`);
  return {
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port ? Number(u.port) : 6379,
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db: db === '' ? 0 : Number(db),
    tls: u.protocol === 'rediss:' ? {} : undefined,
    // BullMQ's workers block on Redis: they need commands retried for as long as the connection is down
    maxRetriesPerRequest: null,
  };
}

/** The URL with its password masked, for messages and logs. */
export function safeUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@/]*@/, '$1***@');
}

/** Connects once and pings: the reason Redis cannot be used, as PLANC_E708, or nothing. */
export async function checkRedis(url: string): Promise<void> {
  const where = safeUrl(url);
  const client = new Redis({
    ...redisOptions(url),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 5000,
  });
  let cause = ''; // the connection's own error (WRONGPASS, ECONNREFUSED): the awaited calls only say it closed
  client.on('error', (e: Error) => {
    cause ||= e.message;
  });
  try {
    await client.connect();
    await client.ping();
  } catch (e) {
    const msg = cause || ((e as Error).message ?? String(e));
    if (/WRONGPASS|NOAUTH|invalid password|invalid username-password/i.test(msg)) {
      throw new PlancError(
        'PLANC_E708',
        `Redis at ${where} refused the credentials: ${msg.split('\n')[0]} (give them in the URL: redis://user:password@host:port)`,
      );
    }
    throw new PlancError('PLANC_E708', `cannot use Redis at ${where}: ${msg.split('\n')[0]}`);
  } finally {
    client.disconnect();
  }
}
