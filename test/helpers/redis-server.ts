// A private redis-server for tests: a free loopback port, its own folder, AOF on (every write fsynced), stopped after.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

/** Why redis-server cannot run here, or undefined when it can. */
export function redisMissing(): string | undefined {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? undefined : 'need redis-server (Debian package redis-server; scripts/setup.sh installs it)';
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export class RedisServer {
  private proc?: ChildProcess;
  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly extra: string[],
  ) {}

  /** Starts one; extra: more redis-server arguments (e.g. ['--requirepass', 'secret']). */
  static async start(dir: string, extra: string[] = []): Promise<RedisServer> {
    fs.mkdirSync(dir, { recursive: true });
    const r = new RedisServer(await freePort(), dir, extra);
    await r.up();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts the process (again, after stop) and waits until it answers. */
  async up(): Promise<void> {
    this.proc = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--dir',
        this.dir,
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
        '--save',
        '',
        '--logfile',
        path.join(this.dir, 'redis.log'),
        ...this.extra,
      ],
      { stdio: 'ignore' },
    );
    for (let i = 0; i < 100; i++) {
      if (
        await new Promise<boolean>((resolve) => {
          const c = net.connect(this.port, '127.0.0.1', () => {
            c.end();
            resolve(true);
          });
          c.on('error', () => resolve(false));
        })
      )
        return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`redis-server on port ${this.port} did not start (see ${path.join(this.dir, 'redis.log')})`);
  }

  /** Stops the process (SIGTERM: Redis flushes its AOF and exits) and waits for it to go. */
  async stop(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGTERM');
    });
  }
}
