// CUDA source emission: the kernel templates plus one extern "C" entry point per distinct instantiation of a plan.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CudaCall, PlanProgram } from '../../compiler/plan/types.ts';
import { selectCuda, type Instance } from './rules.ts';

/** The template files, in the order the generated .cu holds them. */
const TEMPLATE_FILES = [
  'enums.cuh',
  'kernel_args.cuh',
  'common.cuh',
  'elementwise.cuh',
  'gemm.cuh',
  'rows.cuh',
  'movement.cuh',
  'quant.cuh',
  'attention.cuh',
  'vocab.cuh',
];
const TEMPLATE_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'kernels');

export interface CudaEntry {
  name: string;
  template: string;
  block: number;
  /** __launch_bounds__'s min blocks per SM, when the rule sets one. */
  minBlocks?: number;
  /** The kernel name (of native/PROGRAM.md) it implements, and the nodes it runs for. */
  kernel: string;
  nodes: string[];
}

export interface GeneratedCuda {
  source: string;
  entries: CudaEntry[];
  /** Per program, the launch of each kernel call. */
  programs: { calls: CudaCall[] }[];
  scratchBytes: number;
}

export function templateSource(): string {
  return TEMPLATE_FILES.map((f) => fs.readFileSync(path.join(TEMPLATE_DIR, f), 'utf8')).join('\n');
}

/**
 * Emits the .cu for every kernel call of every program: the launch variants chosen already (`variants`, per program,
 * per call: the select-variants program pass) or else selected here (failing on the first call that has none).
 */
export function generateCuda(programs: PlanProgram[], banner: string, variants?: Instance[][][]): GeneratedCuda {
  const entries: CudaEntry[] = [];
  const byKey = new Map<string, CudaEntry>();
  let scratchBytes = 0;
  const entryFor = (
    kernel: string,
    template: string,
    block: number,
    minBlocks: number | undefined,
    node: string,
  ): string => {
    const key = `${template}|${block}|${minBlocks ?? 0}`;
    let e = byKey.get(key);
    if (!e) {
      e = {
        name: `k${entries.length}_${kernel}`,
        template,
        block,
        ...(minBlocks ? { minBlocks } : {}),
        kernel,
        nodes: [],
      };
      entries.push(e);
      byKey.set(key, e);
    }
    if (e.nodes.length < 8) e.nodes.push(node.replace(/[^\x20-\x7e]/g, '?'));
    return e.name;
  };
  const out = programs.map((p, pi) => ({
    calls: p.kernels.map(
      (k, i): CudaCall => ({
        variants: (variants?.[pi]?.[i] ?? selectCuda(p, i)).map((inst) => {
          scratchBytes = Math.max(scratchBytes, inst.scratchBytes ?? 0);
          return {
            entry: entryFor(k.name, inst.template, inst.block, inst.minBlocks, `${p.graph}/${k.node}`),
            block: inst.block,
            maxRows: inst.maxRows ?? 0,
            grid: inst.grid,
          };
        }),
      }),
    ),
  }));
  const lines = [
    `// ${banner}`,
    `// ${entries.length} entry points for ${programs.map((p) => `${p.graph} (${p.kernels.length} calls)`).join(', ')}.`,
    templateSource(),
    '// ---- entry points: one per distinct instantiation ----',
    ...entries.map((e) =>
      [
        `// ${e.kernel}: ${e.nodes.join(', ')}${e.nodes.length >= 8 ? ', ...' : ''}`,
        `extern "C" __global__ void __launch_bounds__(${e.block}${e.minBlocks ? `, ${e.minBlocks}` : ''}) ${e.name}(const __grid_constant__ planc::KArgs a) { ${e.template}(a); }`,
      ].join('\n'),
    ),
    // The CPU build of the emulated device (native/cudasim): a trampoline per entry that unpacks cuLaunchKernel's
    // void** params. nvcc never defines PLANC_CUDASIM, so this block is not part of the GPU build.
    '#ifdef PLANC_CUDASIM',
    ...entries.map((e) => `CUDASIM_ENTRY(${e.name}, ${e.block})`),
    '#endif',
    '',
  ];
  return { source: lines.join('\n'), entries, programs: out, scratchBytes };
}
