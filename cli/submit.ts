// `planc submit --redis URL -i IN -o OUT`: a text file through the job queue (serve/queue/submit.ts), one translation
// per line in input order; re-running it after an interruption re-uses the finished jobs.
import * as fs from 'node:fs';
import { PlancError } from '../compiler/diagnostics.ts';
import { DEFAULT_QUEUE } from '../serve/queue/jobs.ts';
import { submitLines } from '../serve/queue/submit.ts';
import type { ClientOptions } from '../serve/translate-route.ts';
import { intOption, parseArgs, type CommandSpec } from './args.ts';
import { checkInputFile, checkOutputFile } from './files.ts';

export const SUBMIT: CommandSpec = {
  name: 'submit',
  args: '',
  positional: [0, 0],
  summary:
    'Translates a text file (one sentence per line) through planc workers on a BullMQ queue: the lines are split into jobs, and the translations are written in input order as the jobs finish, one line per input line (a line that fails gives an empty line and a message on standard error naming it; the exit status is then 2). Jobs are named by their content, so re-running the same command after an interruption re-uses every finished job instead of translating it again.',
  options: {
    redis: { kind: 'string', value: 'URL', help: 'the Redis server: redis://[user:password@]host:port[/db]; required' },
    input: { kind: 'string', short: 'i', value: 'FILE', help: 'the sentences (UTF-8, one per line); required' },
    output: { kind: 'string', short: 'o', value: 'FILE', help: 'the translations (default: standard output)' },
    model: {
      kind: 'string',
      value: 'NAME',
      help: "the model (a plan's file name without .plan); may be left out when the live workers hold one",
    },
    queue: { kind: 'string', value: 'NAME', help: `queue prefix shared with the workers (default ${DEFAULT_QUEUE})` },
    'job-lines': { kind: 'number', value: 'N', help: 'lines per job (default 10)' },
    beam: { kind: 'number', value: 'N', help: "beam size (default: the plan's)" },
    'max-length': { kind: 'number', value: 'N', help: 'most target tokens per sentence' },
    'target-lang': { kind: 'string', value: 'LANG', help: 'target language token, for multilingual plans' },
    truncate: { kind: 'boolean', help: "cut over-long sentences to the plan's --max-src-len instead of failing them" },
    quiet: { kind: 'boolean', help: 'no progress on standard error' },
  },
  notes: `Example:
  planc worker es-en.plan --redis redis://127.0.0.1:6379 &
  planc submit --redis redis://127.0.0.1:6379 -i test.es -o test.en`,
};

export async function runSubmit(argv: string[]): Promise<number> {
  const { flags } = parseArgs(SUBMIT, argv);
  if (flags.redis === undefined) throw new PlancError('PLANC_E301', '--redis URL is required (redis://host:port)');
  if (flags.input === undefined) throw new PlancError('PLANC_E301', '--input FILE is required');
  const input = String(flags.input);
  checkInputFile(input, '--input');
  const output = flags.output === undefined ? undefined : String(flags.output);
  if (output) checkOutputFile(output, '--output');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(fs.readFileSync(input));
  } catch {
    throw new PlancError('PLANC_E012', `--input ${input} is not valid UTF-8 text; planc submit reads UTF-8`, {
      file: input,
    });
  }
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const options: ClientOptions = {};
  const beam = intOption(flags, 'beam', 1, 64);
  if (beam !== undefined) options.beam = beam;
  const maxLength = intOption(flags, 'max-length', 1, 1 << 16);
  if (maxLength !== undefined) options.maxLength = maxLength;
  if (flags['target-lang'] !== undefined) options.targetLang = String(flags['target-lang']);
  if (flags.truncate === true) options.truncate = true;
  const quiet = flags.quiet === true;
  const fd = output ? fs.openSync(`${output}.partial`, 'w') : 1;
  let failed = 0;
  let lastShown = -1;
  const t0 = performance.now();
  const r = await submitLines(
    lines,
    {
      redis: String(flags.redis),
      queue: flags.queue === undefined ? DEFAULT_QUEUE : String(flags.queue),
      model: flags.model === undefined ? undefined : String(flags.model),
      options: Object.keys(options).length ? options : undefined,
      jobLines: intOption(flags, 'job-lines', 1, 10_000) ?? 10,
      onProgress: (done, total, reused) => {
        const tenth = Math.floor((10 * done) / Math.max(1, total));
        if (quiet || tenth === lastShown) return;
        lastShown = tenth;
        process.stderr.write(
          `  jobs ${done}/${total}${reused ? ` (${reused} finished before, re-used)` : ''} ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
        );
      },
    },
    (index, t) => {
      if ('error' in t) {
        failed++;
        process.stderr.write(`planc submit: line ${index + 1}: ${t.error.code}: ${t.error.message}\n`);
        fs.writeSync(fd, '\n');
      } else fs.writeSync(fd, `${t.text.replace(/\n/g, ' ')}\n`);
    },
  );
  if (output) {
    fs.closeSync(fd);
    fs.renameSync(`${output}.partial`, output);
  }
  if (!quiet)
    process.stderr.write(
      `submitted ${lines.length} lines in ${r.jobs} jobs (${r.reused} re-used) in ${((performance.now() - t0) / 1000).toFixed(2)} s${failed ? `; ${failed} lines failed (empty output lines)` : ''}\n`,
    );
  return failed ? 2 : 0;
}
