// `planc optimize --emit-ts FILE`: a typed TypeScript module for a plan (made with ts-morph from its header only): each
// graph's feeds and outputs with their dtypes and symbolic dims as types, and typed run/translate wrappers over planc.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { IndentationText, Project, QuoteKind, VariableDeclarationKind, type SourceFile } from 'ts-morph';
import { PLAN_DTYPES } from '../compiler/kernel-enums.ts';
import type { PlanHeader, PlanProgram } from '../compiler/plan/types.ts';
import { exprText } from '../compiler/plan/expr.ts';

export interface EmitTsOptions {
  /** The plan file, as the generated module's default path: relative to the module (resolved from its import.meta.url). */
  planPath: string;
  /** The package the module imports the runtime from. Default 'planc'. */
  runtime?: string;
  /** The plan's file name as the header comment shows it. */
  planName?: string;
}

/** Element arrays by dtype name: the runtime's contract (runtime/tensor.ts ARRAY). */
const ARRAYS: Record<string, string> = {
  float32: 'Float32Array',
  float64: 'Float64Array',
  float16: 'Uint16Array',
  bfloat16: 'Uint16Array',
  int32: 'Int32Array',
  int64: 'BigInt64Array',
  int8: 'Int8Array',
  uint8: 'Uint8Array',
  bool: 'Uint8Array',
};

const DTYPE_NAME = new Map(PLAN_DTYPES.map((d) => [d.code, d.name]));

/** `decoder_with_past` → `DecoderWithPast`. */
function pascal(name: string): string {
  const s = name.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase());
  const p = s.charAt(0).toUpperCase() + s.slice(1);
  return /^[A-Za-z_]/.test(p) ? p : `G${p}`;
}

/** A tuple element label: the symbol's name, or a readable identifier for an expression or a fixed size. */
function label(text: string, axis: number, used: Set<string>): string {
  let l = /^\d+$/.test(text)
    ? `dim${axis}`
    : text.replace(/\+/g, '_plus_').replace(/-/g, '_minus_').replace(/\*/g, '_times_').replace(/\W/g, '_');
  if (!/^[A-Za-z_$]/.test(l)) l = `d_${l}`;
  while (used.has(l)) l = `${l}_${axis}`;
  used.add(l);
  return l;
}

/** The dims as a labeled tuple type: a fixed size is its literal type, a symbolic one `number` (with its name as the label). */
function shapeType(p: PlanProgram, dims: number[]): { type: string; text: string } {
  const used = new Set<string>();
  const texts = dims.map((e) => exprText(p, e));
  const type = `[${texts.map((t, i) => `${label(t, i, used)}: ${/^\d+$/.test(t) ? t : 'number'}`).join(', ')}]`;
  return { type, text: `[${texts.join(', ')}]` };
}

/** A string literal in single quotes (the module's style). */
const quote = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const propName = (n: string) => (/^[A-Za-z_$][\w$]*$/.test(n) ? n : quote(n));

/** One interface of a graph's feeds or outputs: a property per tensor, typed by dtype and shape. */
function addTensors(sf: SourceFile, name: string, doc: string, p: PlanProgram, which: 'inputs' | 'outputs'): void {
  sf.addInterface({
    name,
    isExported: true,
    docs: [doc],
    properties: p[which].map((io) => {
      const t = p.tensors[io.tensor]!;
      const dtype = DTYPE_NAME.get(t.dtype);
      if (!dtype || !ARRAYS[dtype])
        throw new Error(`emit-ts: ${p.graph} ${io.name} has dtype code ${t.dtype}, which plans do not use`);
      const shape = shapeType(p, t.dims);
      return {
        name: propName(io.name),
        type: `${which === 'inputs' ? 'Feed' : 'Tensor'}<'${dtype}', ${shape.type}>`,
        docs: [`${dtype} ${shape.text}`],
      };
    }),
  });
}

/** The generated module's text for a plan's header. */
export function emitPlanTypes(header: PlanHeader, options: EmitTsOptions): string {
  const runtime = options.runtime ?? 'planc';
  const project = new Project({
    useInMemoryFileSystem: true,
    manipulationSettings: { quoteKind: QuoteKind.Single, indentationText: IndentationText.TwoSpaces },
  });
  const sf = project.createSourceFile('plan.ts', '', { overwrite: true });
  const graphs = header.programs.map((p) => p.graph);
  const translatesIds = graphs.includes('encoder') && graphs.includes('decoder');
  const translatesText = translatesIds && header.tokenizerKind !== '';

  sf.addImportDeclaration({ moduleSpecifier: 'node:url', namedImports: ['fileURLToPath'] });
  const types = [
    'FeedTensor',
    'Plan',
    'Resident',
    ...(translatesIds ? ['DecodingOptions', 'TranslationResult'] : []),
    ...(translatesText ? ['TranslateOptions'] : []),
  ];
  sf.addImportDeclaration({
    moduleSpecifier: runtime,
    namedImports: ['loadPlan', ...types.sort().map((n) => ({ name: n, isTypeOnly: true }))],
  });

  sf.addInterface({
    name: 'DTypeArrays',
    isExported: true,
    docs: [
      'The element array of each dtype (int64 as BigInt64Array, float16 as raw Uint16Array bits, bool as Uint8Array).',
    ],
    properties: Object.entries(ARRAYS).map(([d, a]) => ({ name: d, type: a })),
  });
  sf.addTypeAlias({ name: 'DType', isExported: true, type: 'keyof DTypeArrays' });
  sf.addTypeAlias({
    name: 'Tensor',
    isExported: true,
    typeParameters: ['D extends DType', 'S extends number[]'],
    type: '{ dtype: D; dims: S; data: DTypeArrays[D] }',
    docs: [
      'A tensor of dtype D and shape S: S is a tuple whose symbolic dims are numbers (labeled by their symbol) and fixed dims their size.',
    ],
  });
  sf.addTypeAlias({
    name: 'Feed',
    isExported: true,
    typeParameters: ['D extends DType', 'S extends number[]'],
    type: 'Tensor<D, S> | { dtype: D; dims: S; resident: Resident; offset: number }',
    docs: ["A feed: a tensor, or the same tensor in one of the plan's resident buffers."],
  });

  const symbols = new Map<string, number>();
  for (const p of header.programs)
    for (const s of p.symbols) symbols.set(s.name, header.profile.symbolMax[s.name] ?? symbols.get(s.name) ?? 0);
  sf.addVariableStatement({
    isExported: true,
    declarationKind: VariableDeclarationKind.Const,
    docs: ["The upper bound of each symbolic dim in the plan's profile (feeds over it are refused)."],
    declarations: [
      {
        name: 'SYMBOL_MAX',
        initializer: `{ ${[...symbols].map(([n, m]) => `${propName(n)}: ${m}`).join(', ')} } as const`,
      },
    ],
  });

  const graphTypes: { graph: string; feeds: string; outputs: string }[] = [];
  const taken = new Set<string>();
  for (const p of header.programs) {
    let base = pascal(p.graph);
    while (taken.has(base)) base = `${base}_`;
    taken.add(base);
    addTensors(sf, `${base}Feeds`, `Feeds of graph '${p.graph}'.`, p, 'inputs');
    addTensors(sf, `${base}Outputs`, `Outputs of graph '${p.graph}'.`, p, 'outputs');
    graphTypes.push({ graph: p.graph, feeds: `${base}Feeds`, outputs: `${base}Outputs` });
  }
  sf.addInterface({
    name: 'Graphs',
    isExported: true,
    docs: ['Every graph of the plan: its feeds and outputs.'],
    properties: graphTypes.map((g) => ({
      name: propName(g.graph),
      type: `{ feeds: ${g.feeds}; outputs: ${g.outputs} }`,
    })),
  });
  sf.addTypeAlias({ name: 'GraphName', isExported: true, type: 'keyof Graphs' });

  const methods = [
    {
      name: 'run',
      typeParameters: ['G extends GraphName'],
      parameters: [
        { name: 'graph', type: 'G' },
        { name: 'feeds', type: "Graphs[G]['feeds']" },
      ],
      returnType: "Promise<Graphs[G]['outputs']>",
      docs: ['Runs one graph (Plan.run): a feed of another name, dtype or rank does not compile.'],
    },
    ...(translatesIds
      ? [
          {
            name: 'translateIds',
            parameters: [
              { name: 'ids', type: 'number[][]' },
              { name: 'options', type: 'Partial<DecodingOptions>', hasQuestionToken: true },
            ],
            returnType: 'Promise<TranslationResult[]>',
            docs: ['Translates source token ids (Plan.translateIds).'],
          },
        ]
      : []),
    ...(translatesText
      ? [
          {
            name: 'translate',
            parameters: [
              { name: 'texts', type: 'string[]' },
              { name: 'options', type: 'TranslateOptions', hasQuestionToken: true },
            ],
            returnType: 'Promise<string[]>',
            docs: [`Translates sentences with the plan's ${header.tokenizerKind} tokenizer (Plan.translate).`],
          },
        ]
      : []),
    { name: 'close', returnType: 'void', parameters: [], docs: ["Frees the plan's native memory."] },
  ];
  sf.addInterface({
    name: 'TypedPlan',
    isExported: true,
    docs: ['The plan with typed graphs.'],
    properties: [{ name: 'plan', type: 'Plan', isReadonly: true, docs: ['The untyped plan underneath.'] }],
    methods,
  });

  const rel = options.planPath.startsWith('/') ? undefined : `./${options.planPath.replace(/^\.\//, '')}`;
  sf.addVariableStatement({
    isExported: true,
    declarationKind: VariableDeclarationKind.Const,
    docs: ['The plan file this module was generated for.'],
    declarations: [
      {
        name: 'PLAN_FILE',
        initializer: rel ? `fileURLToPath(new URL(${quote(rel)}, import.meta.url))` : quote(options.planPath),
      },
    ],
  });
  sf.addFunction({
    name: 'load',
    isExported: true,
    isAsync: true,
    parameters: [{ name: 'file', type: 'string', initializer: 'PLAN_FILE' }],
    returnType: 'Promise<TypedPlan>',
    docs: ['Loads the plan (by default the one this module was generated for) with typed graphs.'],
    statements: [
      'const plan: Plan = await loadPlan(file);',
      `return {
  plan,
  run: (graph, feeds) => plan.run(graph, feeds as unknown as Record<string, FeedTensor>) as Promise<never>,${
    translatesIds
      ? `
  translateIds: (ids, options) => plan.translateIds(ids, options),`
      : ''
  }${
    translatesText
      ? `
  translate: (texts, options) => plan.translate(texts, options),`
      : ''
  }
  close: () => plan.close(),
};`,
    ],
  });
  sf.formatText({ indentSize: 2 });
  sf.insertText(
    0,
    `// Generated by planc optimize --emit-ts for ${options.planName ?? options.planPath} (planc ${header.plancVersion}, ` +
      `${header.target.kind} plan): its graphs' feeds and outputs as types. Do not edit; regenerate it with the plan.\n`,
  );
  return sf.getFullText();
}

/** Writes the module for the plan written to planFile into file (the plan's default path relative to it). */
export function writePlanTypes(file: string, planFile: string, header: PlanHeader): void {
  const rel = path
    .relative(path.dirname(path.resolve(file)), path.resolve(planFile))
    .split(path.sep)
    .join('/');
  fs.writeFileSync(file, emitPlanTypes(header, { planPath: rel, planName: path.basename(planFile) }));
}
