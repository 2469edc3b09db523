// planc --version and help: every command's --help lists every option of its table, from that table.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../compiler/paths.ts';
import { COMMON_OPTIONS, formatHelp, parseArgs, type CommandSpec } from '../cli/args.ts';
import { planc } from './helpers/planc-cli.ts';

/** The command names `planc --help` lists (the lines under "commands:"). */
function listedCommands(help: string): string[] {
  const block = help.split('commands:\n')[1]!.split('\n\n')[0]!;
  return block
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0]!)
    .filter((c) => c);
}

/** A command's option table: the CommandSpec its module (cli/NAME.ts) exports. */
async function specOf(name: string): Promise<CommandSpec> {
  const mod = (await import(path.join(REPO_ROOT, 'cli', `${name}.ts`))) as Record<string, unknown>;
  const spec = Object.values(mod).find(
    (v): v is CommandSpec =>
      (v as CommandSpec | undefined)?.name === name && typeof (v as CommandSpec).options === 'object',
  );
  if (!spec) throw new Error(`cli/${name}.ts exports no CommandSpec named ${name}`);
  return spec;
}

/** Every option of the table (and the common ones) appears in the help as `--name`, `-s, --name` when it has a short form. */
function assertListsAll(help: string, spec: CommandSpec): void {
  for (const [name, o] of Object.entries({ ...spec.options, ...COMMON_OPTIONS })) {
    const head = `${o.short ? `-${o.short}, ` : ''}--${name}${o.kind === 'boolean' ? '' : ' '}`;
    assert.ok(help.includes(head), `${spec.name} --help lists '${head.trim()}'`);
    assert.ok(o.help.trim().length > 10, `${spec.name} --${name} is described`);
    assert.ok(help.includes(o.help.split(' ').slice(0, 3).join(' ')), `${spec.name} --${name}'s description is shown`);
  }
}

let top = '';

test('planc --version prints the package version; planc --help lists the commands', () => {
  const v = planc(['--version']);
  assert.is(v.status, 0, v.stderr);
  const pkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
  assert.is(v.stdout.trim(), `planc ${pkg.version}`);
  const h = planc(['--help']);
  assert.is(h.status, 0, h.stderr);
  top = h.stdout;
  const cmds = listedCommands(top);
  for (const c of ['optimize', 'translate', 'run', 'inspect']) assert.ok(cmds.includes(c), `${c} in ${cmds}`);
});

test("every command's help lists every option of its table, each described", async () => {
  const cmds = listedCommands(top || planc(['--help']).stdout);
  for (const name of cmds) {
    const spec = await specOf(name);
    assert.ok(spec.summary.length > 20, `${name} has a summary`);
    assertListsAll(formatHelp(spec), spec);
    // the table is what parsing knows: each option parses (with a value where it takes one)
    for (const [opt, o] of Object.entries(spec.options)) {
      const args = [
        ...Array.from({ length: spec.positional?.[0] ?? 1 }, () => 'X'),
        `--${opt}`,
        ...(o.kind === 'boolean' ? [] : ['1']),
      ];
      assert.is(
        parseArgs(spec, args).flags[opt],
        o.kind === 'boolean' ? true : o.kind === 'number' ? 1 : '1',
        `${name} --${opt}`,
      );
    }
  }
});

test('planc CMD --help and planc help CMD print that help (status 0); an unknown option points to --help', async () => {
  const spec = await specOf('translate');
  const a = planc(['translate', '--help']);
  assert.is(a.status, 0, a.stderr);
  assert.is(a.stdout.trim(), formatHelp(spec).trim());
  for (const s of [
    '--n-best',
    '--scores',
    '--length-penalty',
    '--batch-tokens',
    '--threads',
    '-i, --input',
    '-o, --output',
    'INDEX ||| TEXT ||| SCORE',
  ])
    assert.ok(a.stdout.includes(s), s);
  const b = planc(['help', 'run']);
  assert.is(b.status, 0, b.stderr);
  assert.is(b.stdout.trim(), formatHelp(await specOf('run')).trim());
  try {
    parseArgs(await specOf('run'), ['x.plan', '--frobnicate']);
    assert.unreachable('an unknown option parsed');
  } catch (e) {
    assert.match((e as Error).message, /^PLANC_E301: unknown option --frobnicate for 'run'/);
    assert.match((e as Error).message, /planc run --help lists the options/);
  }
});

test.run();
