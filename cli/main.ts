// planc's command-line entry: --version, help, one module per command (loaded on demand); errors print their code, exit 2.
import { PlancError } from '../compiler/diagnostics.ts';
import { formatHelp, wantsHelp, type CommandSpec } from './args.ts';
import { cliOptionError } from './option-errors.ts';
import { plancVersion } from '../compiler/version.ts';

/** A command module's table of options (for parsing and help) and its run. */
interface Command {
  spec: CommandSpec;
  run(argv: string[]): number | Promise<number>;
}

/** The commands: a line for `planc --help`, and how to load the module (only the one asked for is loaded). */
const COMMANDS: Record<string, { line: string; load: () => Promise<Command> }> = {
  optimize: {
    line: 'compile a model (an ONNX file or a Hugging Face seq2seq folder) into a plan',
    load: async () => {
      const m = await import('./optimize.ts');
      return { spec: m.OPTIMIZE, run: m.runOptimize };
    },
  },
  translate: {
    line: 'translate text (one sentence per line) with a plan, streaming',
    load: async () => {
      const m = await import('./translate.ts');
      return { spec: m.TRANSLATE, run: m.runTranslate };
    },
  },
  ddgviz: {
    line: 'draw parallel Jacobi decodes (pj, pgj, hgj) of a text file as a DDGviz HTML page',
    load: async () => {
      const m = await import('./ddgviz.ts');
      return { spec: m.DDGVIZ, run: m.runDdgviz };
    },
  },
  run: {
    line: 'run one graph of a plan on feeds from a .json or .npz file',
    load: async () => {
      const m = await import('./run.ts');
      return { spec: m.RUN, run: m.runRun };
    },
  },
  tune: {
    line: "tune a plan's kernel variants on this machine (a model is compiled first), with a persisted cache",
    load: async () => {
      const m = await import('./tune.ts');
      return { spec: m.TUNE, run: m.runTune };
    },
  },
  report: {
    line: "write a plan's report: where time goes, tuning decisions, precision, vocabulary, memory (HTML or --json)",
    load: async () => {
      const m = await import('./report.ts');
      return { spec: m.REPORT, run: m.runReport };
    },
  },
  serve: {
    line: 'serve plans over HTTP with continuous batching across requests (JSON or streamed answers, metrics)',
    load: async () => {
      const m = await import('./serve.ts');
      return { spec: m.SERVE, run: m.runServe };
    },
  },
  worker: {
    line: 'translate jobs from a BullMQ queue on Redis (scale-out: one worker per machine, any number of machines)',
    load: async () => {
      const m = await import('./worker.ts');
      return { spec: m.WORKER, run: m.runWorker };
    },
  },
  submit: {
    line: 'translate a text file through the workers of a queue, in order, resumable after an interruption',
    load: async () => {
      const m = await import('./submit.ts');
      return { spec: m.SUBMIT, run: m.runSubmit };
    },
  },
  inspect: {
    line: 'describe a model or a plan: graphs, I/O, ops, weights; for plans: arena and kernels',
    load: async () => {
      const m = await import('./inspect.ts');
      return { spec: m.INSPECT, run: m.runInspect };
    },
  },
};

function usage(): string {
  const w = Math.max(...Object.keys(COMMANDS).map((c) => c.length)) + 2;
  return [
    'usage: planc COMMAND [options]',
    '       planc COMMAND --help     (or planc help COMMAND) the options of a command',
    '       planc --version',
    '',
    'commands:',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(w)}${c.line}`),
    '',
    'Every command takes -h/--help and --debug (stack traces on errors). An error is one line with a stable PLANC_E',
    'code; the exit status is 0 on success, 2 on errors. PLANC_NUM_THREADS sets the CPU threads (as --threads).',
  ].join('\n');
}

/** Reports an error: its one line (the stack only with --debug); the exit status. */
function fail(thrown: unknown, cmd: string, debug: boolean): number {
  const e = cliOptionError(thrown); // the library names its options; the command line's message names its flags
  if (debug) console.error(e);
  else if (e instanceof PlancError) console.error(`planc${cmd ? ` ${cmd}` : ''}: ${e.message}`);
  else
    console.error(
      `planc${cmd ? ` ${cmd}` : ''}: internal error: ${(e as Error)?.message ?? String(e)} (run with --debug for the stack)`,
    );
  return 2;
}

/** A reader that went away (`planc translate ... | head -2`) ends the command quietly, with status 0. */
function quietOnClosedStdout(cmd: string, debug: boolean): void {
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE' || e.code === 'ERR_STREAM_DESTROYED') process.exit(0);
    process.exit(fail(e, cmd, debug));
  });
}

export async function main(argv: string[]): Promise<number> {
  const debug = argv.includes('--debug');
  const [cmd, ...rest] = argv;
  quietOnClosedStdout(cmd ?? '', debug);
  for (const ev of ['uncaughtException', 'unhandledRejection'] as const)
    process.on(ev, (e) => process.exit(fail(e, cmd ?? '', debug)));
  if (cmd === '--version' || cmd === '-V' || cmd === 'version') {
    console.log(`planc ${plancVersion()}`);
    return 0;
  }
  if (!cmd) {
    console.error(usage());
    return 2;
  }
  if (cmd === '--help' || cmd === '-h' || cmd === 'help') {
    const topic = cmd === 'help' ? rest[0] : undefined;
    if (topic === undefined) {
      console.log(usage());
      return 0;
    }
    const c = COMMANDS[topic];
    if (!c)
      return fail(
        new PlancError('PLANC_E301', `no command '${topic}' (commands: ${Object.keys(COMMANDS).join(', ')})`),
        '',
        debug,
      );
    console.log(formatHelp((await c.load()).spec));
    return 0;
  }
  const c = COMMANDS[cmd];
  if (!c) return fail(new PlancError('PLANC_E301', `unknown command '${cmd}'\n${usage()}`), '', debug);
  try {
    const command = await c.load();
    if (wantsHelp(rest)) {
      console.log(formatHelp(command.spec));
      return 0;
    }
    return await command.run(rest);
  } catch (e) {
    return fail(e, cmd, debug);
  }
}

process.exitCode = await main(process.argv.slice(2));
