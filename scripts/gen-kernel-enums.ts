// Writes the headers (and native/KERNELS.md, the kernel reference) generated from compiler/kernel-enums.ts and compiler/kernel-schema.ts (`npm run gen:kernel-enums`;
// --check only compares).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { cudaEnumsHeader, nativeEnumsHeader } from '../compiler/kernel-enums.ts';
import {
  cudaArgsHeader,
  kernelReference,
  nativeArgsHeader,
  nativeTestCallsHeader,
} from '../compiler/kernel-schema-headers.ts';
import { REPO_ROOT } from '../compiler/paths.ts';

/** Each generated file, relative to the repository root, with its text. */
export const GENERATED: [string, () => string][] = [
  ['native/src/generated/kernel_enums.h', nativeEnumsHeader],
  ['codegen/cuda/kernels/enums.cuh', cudaEnumsHeader],
  ['native/src/generated/kernel_args.h', nativeArgsHeader],
  ['codegen/cuda/kernels/kernel_args.cuh', cudaArgsHeader],
  ['native/test/generated/kernel_calls.h', nativeTestCallsHeader],
  ['native/KERNELS.md', kernelReference],
];

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(REPO_ROOT, 'scripts', 'gen-kernel-enums.ts')) {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const [file, text] of GENERATED) {
    const p = path.join(REPO_ROOT, file);
    const now = fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : '';
    if (now === text()) continue;
    stale++;
    if (check) console.error(`${file} is stale: run npm run gen:kernel-enums`);
    else {
      fs.writeFileSync(p, text());
      console.log(`wrote ${file}`);
    }
  }
  if (check && stale) process.exitCode = 1;
}
