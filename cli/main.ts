// planc's command-line entry: dispatches to one file per command; errors print their code and exit 2.
import { PlancError } from '../compiler/diagnostics.ts';
import { runInspect } from './inspect.ts';
import { runOptimize } from './optimize.ts';
import { runRun } from './run.ts';
import { runTranslate } from './translate.ts';

const COMMANDS: Record<string, { run: (argv: string[]) => number | Promise<number>; help: string }> = {
  optimize: { run: runOptimize, help: 'optimize MODEL -o PLAN     compile a model into a plan (--target cpu, --max-batch/--max-src-len/--max-tgt-len)' },
  run: { run: runRun, help: 'run PLAN --graph G --inputs FEEDS.json|.npz   run one graph of a plan' },
  translate: { run: runTranslate, help: 'translate PLAN [--beam N] [--max-length N] [--batch N] [--target-lang CODE] [--truncate] [--ids] < in.txt > out.txt   translate one sentence per line' },
  inspect: { run: runInspect, help: 'inspect MODEL|PLAN [--json] graphs, I/O, opsets, ops, weights, unsupported ops; for plans: arena and kernels' },
};

function usage(): string {
  return `usage: planc COMMAND [options] [--debug]\n\ncommands:\n${Object.values(COMMANDS).map((c) => `  ${c.help}`).join('\n')}`;
}

export async function main(argv: string[]): Promise<number> {
  const debug = argv.includes('--debug');
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') { console.log(usage()); return cmd ? 0 : 2; }
  const c = COMMANDS[cmd];
  if (!c) { console.error(`planc: unknown command '${cmd}'\n${usage()}`); return 2; }
  try {
    return await c.run(rest);
  } catch (e) {
    if (debug) console.error(e);
    else if (e instanceof PlancError) console.error(`planc ${cmd}: ${e.message}`);
    else console.error(`planc ${cmd}: internal error: ${(e as Error).message} (run with --debug for the stack)`);
    return 2;
  }
}

process.exitCode = await main(process.argv.slice(2));
