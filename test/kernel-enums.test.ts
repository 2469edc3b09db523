// The kernel enums and plan dtype codes live once (compiler/kernel-enums.ts): generated headers are current, the codes
// agree with ONNX's, and no other file restates a dtype table or an activation / mask-kind code.
import { execSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ONNX_CODE } from '../compiler/dtype.ts';
import { ACTIVATIONS, MASK_KINDS, PLAN_DTYPES } from '../compiler/kernel-enums.ts';
import { MASK_KIND } from '../model/ops/planc-attention.ts';
import { FUSED_ACTIVATIONS } from '../model/ops/planc-fused.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import { GENERATED } from '../scripts/gen-kernel-enums.ts';

test('the generated headers match compiler/kernel-enums.ts (npm run gen:kernel-enums after an edit)', () => {
  for (const [file, text] of GENERATED) {
    assert.is(
      fs.readFileSync(path.join(REPO_ROOT, file), 'utf8'),
      text(),
      `${file} is stale: run npm run gen:kernel-enums`,
    );
  }
});

test('plan dtype codes are ONNX codes; activations and mask kinds agree with the IR', () => {
  for (const d of PLAN_DTYPES) assert.is(d.code, ONNX_CODE[d.name], d.name);
  assert.equal(Object.keys(FUSED_ACTIVATIONS), [...ACTIVATIONS]);
  assert.equal(
    Object.values(MASK_KIND),
    MASK_KINDS.map((_, i) => i),
  );
});

/** Tracked source files outside the single source and its generated headers. */
function sources(): string[] {
  const own = new Set(['compiler/kernel-enums.ts', ...GENERATED.map(([f]) => f), 'test/kernel-enums.test.ts']);
  return execSync('git ls-files', { cwd: REPO_ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((f) => /\.(ts|cc|h|cuh)$/.test(f) && !own.has(f) && fs.existsSync(path.join(REPO_ROOT, f)));
}

test('no other file restates a dtype code table or an activation / mask-kind code', () => {
  const patterns: [RegExp, string][] = [
    [/kFloat32\s*=\s*1\b/, 'the C++ DType enum'],
    [/\b1:\s*'float(32)?'/, 'a dtype-code table'],
    [/\{\s*1:\s*4,\s*2:\s*1/, 'a dtype-size table'],
    [/gelu_tanh:\s*3\b|silu:\s*4\b/, 'activation codes'],
    [/BOOL_KEEP:\s*2\b|ADD:\s*1,\s*BOOL/, 'mask-kind codes'],
    [
      /case [1-4]: return epilogue_with|ACT == [1-4]\b|MK == [1-3]\b|mask_kind == [1-3]\b/,
      'a literal kernel enum code',
    ],
  ];
  const hits: string[] = [];
  for (const f of sources()) {
    const text = fs.readFileSync(path.join(REPO_ROOT, f), 'utf8');
    for (const [re, what] of patterns) if (re.test(text)) hits.push(`${f}: ${what}`);
  }
  assert.equal(hits, [], `restated outside compiler/kernel-enums.ts:\n${hits.join('\n')}`);
});

test.run();
