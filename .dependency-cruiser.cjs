// README's layer table as dependency-cruiser rules (`npm run lint:layers`, in `npm test`): no upward import, no cycle.
//
// Layers, lowest first; a folder imports only the folders its line names (README "Layout" says the same):
//   compiler/                       the core that every side shares (IR and plan types, kernel schema, vocab): nothing of the others
//   model/                          compiler/ (the model side: ONNX import and export, the op table, shape inference, the
//                                   reference evaluator, the IR verifier and printer, weight ids)
//   passes/                         compiler/, model/
//   codegen/                        compiler/, model/, passes/ (the pipeline's hook types)
//   runtime/                        compiler/ only (never model/)
//   optimize/                       compiler/, model/, passes/, codegen/, runtime/ (the compile driver, the tuner, calibration)
//   pages/                          compiler/, runtime/ (HTML renderers of the data they define: plan, Jacobi traces)
//   serve/                          runtime/, compiler/
//   index.ts                        the public Node API: runtime/, serve/, compiler/
//   cli/, bin/                      every production folder
//   test/, bench/, scripts/         anything; no production folder imports them (test/reference/: the reference decoders
//                                   and kernel-call oracles the tests and benchmarks compare against)
// Type-only imports count like value imports: a type names the module that owns it, and a layer that needs another's
// type depends on its design just as much. For cycles too (no-circular-types), except inside the decode layer for now.

const PRODUCTION = '^(index\\.ts$|bin/|compiler/|model/|passes/|codegen/|runtime/|optimize/|pages/|serve/|cli/)';
const KNOWN =
  '^(index\\.ts$|bin/|compiler/|model/|passes/|codegen/|runtime/|optimize/|pages/|serve/|cli/|test/|bench/|scripts/|node_modules/)';
/** Where type-only cycles are still allowed (see no-circular-types); every other module is checked for them. */
const TYPE_CYCLES_EXEMPT = '^runtime/(decode/|plan\\.ts$|translate\\.ts$)';
/** The model side: what a user who only runs plans must never load. */
const MODEL_SIDE = '^model/';

/** A rule: modules under `from` may not import modules matching `to`. */
const layer = (name, from, to, comment) => ({
  name,
  severity: 'error',
  comment,
  from: { path: from },
  to: { path: to },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'An import cycle through value imports (module load order decides what is initialized): move what both ' +
        'sides need into a lower module.',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'no-circular-types',
      severity: 'error',
      comment:
        'An import cycle through type-only imports: move the shared types into a lower module (as codegen/program-state.ts). ' +
        'Exempt until the decode layer is split: runtime/plan.ts, runtime/translate.ts and runtime/decode/ (Plan is their ' +
        'parameter type while plan.ts calls them; strategy.ts registers the strategies that import its interface). Value ' +
        'cycles there are still errors (no-circular).',
      from: { pathNot: TYPE_CYCLES_EXEMPT },
      to: { circular: true, via: { dependencyTypes: ['type-only'] } },
    },
    {
      name: 'layer-table-covers-every-folder',
      severity: 'error',
      comment: 'A folder outside the layer table: give it a row in .dependency-cruiser.cjs and README "Layout".',
      from: {},
      to: { pathNot: KNOWN, dependencyTypesNot: ['core'] },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to no file.',
      from: {},
      to: { couldNotResolve: true },
    },
    layer(
      'production-not-to-tests',
      PRODUCTION,
      '^(test|bench|scripts)/',
      'Production code never imports tests (their reference decoders, test/reference/, are oracles, not library code), benchmarks or scripts.',
    ),
    layer(
      'compiler-is-the-core',
      '^compiler/',
      '^(model|passes|codegen|runtime|optimize|pages|serve|cli)/|^index\\.ts$',
      'compiler/ imports nothing of the other folders (the model side included: the runtime loads compiler/ whole).',
    ),
    layer(
      'model-above-compiler-only',
      '^model/',
      '^(passes|codegen|runtime|optimize|pages|serve|cli)/|^index\\.ts$',
      'model/ (ONNX, the op table, inference, the reference evaluator) imports compiler/ only.',
    ),
    layer(
      'passes-above-compiler-only',
      '^passes/',
      '^(codegen|runtime|optimize|pages|serve|cli)/|^index\\.ts$',
      'Passes import compiler/ only; what needs the runtime reaches them as PassServices (optimize/compile.ts).',
    ),
    layer(
      'codegen-above-compiler-and-passes',
      '^codegen/',
      '^(runtime|optimize|pages|serve|cli)/|^index\\.ts$',
      'codegen/ lowers IR to programs: compiler/ and passes/ only, never the runtime or the driver.',
    ),
    layer(
      'runtime-runs-plans',
      '^runtime/',
      '^(model|passes|codegen|optimize|pages|serve|cli)/|^index\\.ts$',
      'runtime/ runs plans: compiler/ only.',
    ),
    {
      name: 'run-side-never-loads-the-model-side',
      severity: 'error',
      comment:
        'A user who only runs plans needs runtime/ + native/ + compiler/ (DESIGN "keep it so"): runtime/, serve/ ' +
        'and index.ts never reach model/ (ONNX import, the reference evaluator, the op table, inference), even transitively.',
      from: { path: '^(runtime|serve)/|^index\\.ts$' },
      to: { path: MODEL_SIDE, reachable: true },
    },
    layer(
      'optimize-below-the-front-ends',
      '^optimize/',
      '^(pages|serve|cli)/|^index\\.ts$',
      'optimize/ (the compile driver, tuner, calibration) is below the CLI and beside serve/.',
    ),
    layer(
      'pages-render-data',
      '^pages/',
      '^(model|passes|codegen|optimize|serve|cli)/|^index\\.ts$',
      'pages/ renders plans and traces as HTML: compiler/ and runtime/ data, nothing of the compile path or the front ends.',
    ),
    layer(
      'serve-over-the-runtime',
      '^serve/',
      '^(model|passes|codegen|optimize|pages|cli)/|^index\\.ts$',
      "serve/ admits, limits and reports over the runtime's scheduler: runtime/ and compiler/ only.",
    ),
    layer(
      'api-is-not-the-cli',
      '^index\\.ts$',
      '^(cli|bin|optimize|model|passes|codegen|pages)/',
      'The package API (index.ts) exposes running plans and serving: not the CLI or the compile path.',
    ),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist|build)/' },
    moduleSystems: ['es6'],
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'node', 'default'],
      extensions: ['.ts', '.mjs', '.js', '.json'],
    },
    skipAnalysisNotInRules: true,
    // Re-cruised only when a file's content changes (about 3 s instead of 10 on two busy cores).
    cache: { folder: 'node_modules/.cache/dependency-cruiser', strategy: 'content' },
  },
};
