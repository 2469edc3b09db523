// `npm run conformance -- [--json] [--filter RE] [--quiet] [--backend eval|native] [--passes] [DIR...]`: ONNX's conformance suite through planc's evaluator.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sharedDir } from '../../compiler/paths.ts';
import { listTests, runTest, type Backend, type TestResult } from './conformance.ts';

function main(): number {
  const args = process.argv.slice(2);
  let json = false;
  let quiet = false;
  let filter: RegExp | undefined;
  let backend: Backend = 'eval';
  let passes = false;
  const dirs: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--json') json = true;
    else if (a === '--quiet') quiet = true;
    else if (a === '--filter') filter = new RegExp(args[++i] ?? '');
    else if (a === '--passes') passes = true;
    else if (a === '--backend') {
      const b = args[++i];
      if (b !== 'eval' && b !== 'native') {
        console.error(`conformance: --backend must be eval or native, got ${b}`);
        return 2;
      }
      backend = b;
    } else if (a.startsWith('--')) {
      console.error(`conformance: unknown option ${a}`);
      return 2;
    } else dirs.push(a);
  }
  if (dirs.length === 0) {
    const shared = sharedDir();
    if (!shared) {
      console.error('conformance: no ../shared/onnx-tests here; pass test folders explicitly');
      return 2;
    }
    for (const s of ['node', 'simple', 'pytorch-operator', 'pytorch-converted'])
      dirs.push(path.join(shared, 'onnx-tests', s));
  }
  const results: TestResult[] = [];
  for (const d of dirs) {
    const tests = fs.existsSync(path.join(d, 'model.onnx')) ? [d] : listTests(d);
    for (const t of tests) {
      if (filter && !filter.test(path.basename(t))) continue;
      const r = runTest(t, backend, passes);
      results.push(r);
      if (!quiet || r.status === 'failed' || r.status === 'crashed') {
        const tag = { passed: 'PASS', failed: 'FAIL', crashed: 'CRASH', skipped: 'SKIP' }[r.status];
        console.log(
          `${tag} ${path.basename(d) === r.name ? r.name : `${path.basename(d)}/${r.name}`}${r.reason ? `: ${r.reason}` : ''}${r.ms > 2000 ? ` (${(r.ms / 1000).toFixed(1)} s)` : ''}`,
        );
      }
    }
  }
  const count = (s: string) => results.filter((r) => r.status === s).length;
  const passed = count('passed');
  const crashed = count('crashed');
  const failed = count('failed') + crashed;
  const skipped = count('skipped');
  const missing: Record<string, number> = {};
  for (const r of results)
    if (r.status === 'skipped') for (const m of r.missing ?? []) missing[m] = (missing[m] ?? 0) + 1;
  const sorted = Object.fromEntries(Object.entries(missing).sort((a, b) => b[1] - a[1]));
  if (json) {
    const out = { attempted: passed + failed, passed, failed, skipped, crashed, missing: sorted };
    fs.writeFileSync('conformance.json', JSON.stringify(out, null, 2) + '\n');
  }
  if (backend === 'native') {
    const unsupported = results.filter((r) => r.missing?.includes('cpu backend')).length;
    console.log(
      `native backend: ${passed} tests pass through optimize + native run; ${unsupported} that the evaluator passes are not lowered by the cpu backend yet`,
    );
  }
  if (Object.keys(sorted).length)
    console.log(
      `skipped for: ${Object.entries(sorted)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
  console.log(`conformance: ${passed} passed, ${failed} failed, ${skipped} skipped`);
  return failed > 0 ? 1 : 0;
}

process.exitCode = main();
