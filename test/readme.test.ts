// README.md stays true: its js/ts snippets run against a synthetic plan (importing 'planc' as the package's index.ts),
// and every shell line names scripts, files and options that exist (each `planc CMD --flag` is in `planc CMD --help`).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../compiler/paths.ts';
import { readPlanFile } from '../compiler/plan/format.ts';
import { emitPlanTypes } from '../codegen/emit-ts.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan } from '../runtime/plan.ts';
import { createServer } from '../serve/server.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';

const README = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
const PKG = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
  version: string;
  scripts: Record<string, string>;
};
const INDEX = path.join(REPO_ROOT, 'index.ts');
// Inside the checkout (.tmp-*/ is ignored): snippets run there with `node --import tsx`, which resolves tsx from it.
const tmp = fs.mkdtempSync(path.join(REPO_ROOT, '.tmp-readme-'));

interface Block {
  lang: string;
  line: number;
  code: string;
}

/** The fenced blocks of a language (also indented ones inside list items), their common indentation removed. */
function blocks(langs: string[]): Block[] {
  const out: Block[] = [];
  const re = /^( *)```(\w*)\n([\s\S]*?)^\1```$/gm;
  for (const m of README.matchAll(re)) {
    if (!langs.includes(m[2]!)) continue;
    const indent = m[1]!.length;
    out.push({
      lang: m[2]!,
      line: README.slice(0, m.index).split('\n').length,
      code: m[3]!
        .split('\n')
        .map((l) => l.slice(Math.min(indent, l.search(/\S|$/))))
        .join('\n'),
    });
  }
  return out;
}

/** Shell commands of the sh blocks: continuation lines joined, comments dropped, `&&` and `;` chains split. */
function shellCommands(): { line: number; cmd: string }[] {
  const cmds: { line: number; cmd: string }[] = [];
  for (const b of blocks(['sh', 'bash'])) {
    b.code.split('\n').forEach((raw, i) => {
      const l = raw.replace(/\s#\s.*$/, '').trimEnd();
      if (!l.trim()) return;
      if (/^\s+\[/.test(l) && cmds.length) {
        cmds[cmds.length - 1]!.cmd += ` ${l.trim()}`;
        return;
      }
      for (const part of l.split(/&&|;/)) if (part.trim()) cmds.push({ line: b.line + 1 + i, cmd: part.trim() });
    });
  }
  return cmds;
}

const flagsOf = (cmd: string) => [...cmd.matchAll(/(?<![\w-])--([a-z][\w-]*)/g)].map((m) => m[1]!);

test('the README has the two set-up commands, js/ts snippets and shell blocks to check', () => {
  const cmds = shellCommands().map((c) => c.cmd);
  for (const c of ['bash scripts/setup.sh', 'npm run demo', 'npm test'])
    assert.ok(cmds.includes(c), `README runs ${c}`);
  assert.ok(blocks(['js', 'ts']).length >= 2, 'Node API snippets');
});

test('shell lines: npm scripts, files and CLI options exist; the set-up script installs and builds what the README says', () => {
  const helps = new Map<string, string>();
  const problems: string[] = [];
  for (const { line, cmd } of shellCommands()) {
    const words = cmd.split(/\s+/);
    const where = `README.md:${line} \`${cmd.slice(0, 60)}\``;
    if (words[0] === 'npm' && words[1] === 'run') {
      const script = PKG.scripts[words[2]!];
      if (!script) {
        problems.push(`${where}: no npm script ${words[2]}`);
        continue;
      }
      const file = /\S+\.(?:ts|mjs|js)\b/.exec(script)?.[0];
      const text =
        file && fs.existsSync(path.join(REPO_ROOT, file)) ? fs.readFileSync(path.join(REPO_ROOT, file), 'utf8') : '';
      for (const f of flagsOf(words.slice(3).join(' ')))
        if (!text.includes(f)) problems.push(`${where}: ${file ?? script} does not read --${f}`);
    } else if (words[0] === 'npm' && words[1] === 'test') {
      if (!PKG.scripts.test) problems.push(`${where}: no npm test script`);
    } else if (words[0] === 'bash') {
      if (!fs.existsSync(path.join(REPO_ROOT, words[1]!))) problems.push(`${where}: no ${words[1]}`);
    } else if (words[0] === 'npm' && words[1] === 'install' && /\.tgz$/.test(words[2]!)) {
      if (path.basename(words[2]!) !== `planc-${PKG.version}.tgz`)
        problems.push(`${where}: npm pack makes planc-${PKG.version}.tgz`);
    } else if ((words[0] === 'node' && words[1] === 'bin/planc.js') || (words[0] === 'npx' && words[1] === 'planc')) {
      const sub = words[2]!;
      if (sub.startsWith('-')) {
        const r = planc([sub]);
        if (r.status !== 0) problems.push(`${where}: exit ${r.status}: ${r.stderr}`);
        continue;
      }
      if (!helps.has(sub)) {
        const r = planc([sub, '--help']);
        helps.set(sub, r.status === 0 ? r.stdout : '');
        if (r.status !== 0) problems.push(`${where}: planc ${sub} --help exits ${r.status}: ${r.stderr}`);
      }
      for (const f of flagsOf(words.slice(3).join(' ')))
        if (helps.get(sub) && !helps.get(sub)!.includes(`--${f}`))
          problems.push(`${where}: planc ${sub} has no --${f}`);
    }
  }
  assert.equal(problems, []);
  const setup = fs.readFileSync(path.join(REPO_ROOT, 'scripts', 'setup.sh'), 'utf8');
  assert.match(setup, /npm ci\b/);
  assert.match(setup, /npm run build:native/);
  assert.ok(
    PKG.scripts.test!.includes('scripts/run-tests.mjs') && PKG.scripts.test!.includes('tsc'),
    'npm test = type check + the uvu runner',
  );
  assert.match(fs.readFileSync(path.join(REPO_ROOT, 'scripts', 'run-tests.mjs'), 'utf8'), /uvu/);
});

/** The synthetic plan the snippets run against (tmp/model.plan, with a word-level tokenizer: words w2..w100). */
function syntheticPlan(): string {
  const plan = path.join(tmp, 'model.plan');
  if (fs.existsSync(plan)) return plan;
  const model = path.join(tmp, 'model');
  makeModel({
    arch: 'marian',
    d: 16,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 2,
    ffn: 32,
    vocab: 101,
    maxPos: 64,
    activation: 'relu',
    seed: 3,
    out: model,
  });
  fs.writeFileSync(
    path.join(model, 'tokenizer.json'),
    JSON.stringify({
      version: '1.0',
      added_tokens: [],
      normalizer: null,
      pre_tokenizer: { type: 'WhitespaceSplit' },
      post_processor: null,
      decoder: null,
      model: {
        type: 'WordLevel',
        vocab: Object.fromEntries(
          Array.from({ length: 101 }, (_, i) => [i === 0 ? '</s>' : i === 1 ? '<unk>' : `w${i}`, i]),
        ),
        unk_token: '<unk>',
      },
    }),
  );
  const opt = planc([
    'optimize',
    model,
    '-o',
    plan,
    '--quiet',
    '--max-batch',
    '8',
    '--max-src-len',
    '16',
    '--max-tgt-len',
    '16',
  ]);
  assert.is(opt.status, 0, opt.stderr);
  return plan;
}

testIf(test, !nativeAvailable() && NEEDS_NATIVE)(
  'js/ts snippets run with plain imports of planc against a synthetic plan (and its --emit-ts module)',
  () => {
    const plan = syntheticPlan();
    // What `--emit-ts model-plan.ts` writes, importing the package from this checkout's sources.
    fs.writeFileSync(
      path.join(tmp, 'model-plan.ts'),
      emitPlanTypes(readPlanFile(plan).header, { planPath: 'model.plan', runtime: INDEX }),
    );
    for (const [i, b] of blocks(['js', 'ts']).entries()) {
      const file = path.join(tmp, `snippet-${i}.mts`);
      fs.writeFileSync(file, b.code.replace(/from 'planc'/g, `from ${JSON.stringify(INDEX)}`));
      const r = spawnSync(process.execPath, ['--import', 'tsx', file], { cwd: tmp, encoding: 'utf8' });
      assert.is(r.status, 0, `README.md:${b.line} (${b.lang}) fails:\n${r.stderr.slice(-3000)}`);
      assert.ok(r.stdout.trim().length > 0, `README.md:${b.line} prints what its comments say`);
    }
  },
);

const HAS_CURL = spawnSync('curl', ['--version'], { encoding: 'utf8' }).status === 0;

testIf(test, (!nativeAvailable() && NEEDS_NATIVE) || (!HAS_CURL && 'need curl (Debian package curl)'))(
  "the Serving section's curl lines run against a server the test starts",
  async () => {
    const serving = README.slice(
      README.indexOf('## Serving'),
      README.indexOf('\n## ', README.indexOf('## Serving') + 3),
    );
    const lines = [...serving.matchAll(/^curl .*$/gm)].map((m) => m[0]);
    assert.ok(lines.length >= 4, 'the Serving section has curl examples');
    const plan = await loadPlan(syntheticPlan());
    const server = await createServer([plan], { port: 0, logger: false });
    try {
      const address = (await server.listen()).replace(/^http:\/\//, '');
      for (const line of lines) {
        // asynchronously: the server answers from this process's event loop
        const r = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
          execFile(
            'sh',
            ['-c', line.replace(/localhost:8080/g, address)],
            { encoding: 'utf8', timeout: 60_000 },
            (e, stdout, stderr) =>
              resolve({ status: e ? (typeof e.code === 'number' ? e.code : 1) : 0, stdout, stderr }),
          );
        });
        assert.is(r.status, 0, `${line}: ${r.stderr}`);
        const out = r.stdout.trim();
        if (line.includes('/metrics')) assert.match(out, /^planc_requests_total\{/m, line);
        else
          for (const l of out.split('\n')) assert.not.ok((JSON.parse(l) as { error?: unknown }).error, `${line}: ${l}`);
      }
    } finally {
      await server.close();
      plan.close();
    }
  },
);

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test.run();
