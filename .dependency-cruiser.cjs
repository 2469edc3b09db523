// README's layer table as dependency-cruiser rules (`npm run lint:layers`, in `npm test`): no upward import, no cycle.
//
// Layers, lowest first; a folder imports only the folders its line names (README "Layout" says the same):
//   compiler/                       the core: nothing of the others
//   passes/                         compiler/
//   codegen/                        compiler/, passes/ (the pipeline's hook types)
//   runtime/                        compiler/'s plan side only (never the model side: ONNX, IR evaluator, inference)
//   optimize/                       compiler/, passes/, codegen/, runtime/ (the compile driver, the tuner, calibration)
//   pages/                          compiler/, runtime/ (HTML renderers of the data they define: plan, Jacobi traces)
//   serve/                          runtime/, compiler/'s plan side
//   index.ts                        the public Node API: runtime/, serve/, compiler/'s plan side
//   cli/, bin/                      every production folder
//   test/, bench/, scripts/         anything; no production folder imports them
// Type-only imports count like value imports: a type names the module that owns it, and a layer that needs another's
// type depends on its design just as much. For cycles too (no-circular-types), except inside the decode layer for now.

const PRODUCTION = '^(index\\.ts$|bin/|compiler/|passes/|codegen/|runtime/|optimize/|pages/|serve/|cli/)';
const KNOWN = '^(index\\.ts$|bin/|compiler/|passes/|codegen/|runtime/|optimize/|pages/|serve/|cli/|test/|bench/|scripts/|node_modules/)';
/** Where type-only cycles are still allowed (see no-circular-types); every other module is checked for them. */
const TYPE_CYCLES_EXEMPT = '^runtime/(decode/|plan\\.ts$|translate\\.ts$)';
/** The compiler's model side: what a user who only runs plans must never load. */
const MODEL_SIDE = '^compiler/(onnx|eval|ops|infer)/|^compiler/(verify|printer|weights)\\.ts$';

/** A rule: modules under `from` may not import modules matching `to`. */
const layer = (name, from, to, comment) => ({ name, severity: 'error', comment, from: { path: from }, to: { path: to } });

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle through value imports (module load order decides what is initialized): move what both ' +
        'sides need into a lower module.',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'no-circular-types',
      severity: 'error',
      comment: 'An import cycle through type-only imports: move the shared types into a lower module (as codegen/program-state.ts). ' +
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
    layer('production-not-to-tests', PRODUCTION, '^(test|bench|scripts)/',
      'Production code never imports tests, benchmarks (their reference decoders are oracles, not library code) or scripts.'),
    layer('compiler-is-the-core', '^compiler/', '^(passes|codegen|runtime|optimize|pages|serve|cli)/|^index\\.ts$',
      'compiler/ imports nothing of the other folders.'),
    layer('passes-above-compiler-only', '^passes/', '^(codegen|runtime|optimize|pages|serve|cli)/|^index\\.ts$',
      'Passes import compiler/ only; what needs the runtime reaches them as PassServices (optimize/compile.ts).'),
    layer('codegen-above-compiler-and-passes', '^codegen/', '^(runtime|optimize|pages|serve|cli)/|^index\\.ts$',
      'codegen/ lowers IR to programs: compiler/ and passes/ only, never the runtime or the driver.'),
    layer('runtime-runs-plans', '^runtime/', '^(passes|codegen|optimize|pages|serve|cli)/|^index\\.ts$',
      'runtime/ runs plans: compiler/ (its plan side) only.'),
    {
      name: 'run-side-never-loads-the-model-side',
      severity: 'error',
      comment: 'A user who only runs plans needs runtime/ + native/ + the plan side of compiler/ (DESIGN "keep it so"): ' +
        'runtime/, serve/ and index.ts never reach ONNX import, the reference evaluator, the op table or inference, even transitively.',
      from: { path: '^(runtime|serve)/|^index\\.ts$' },
      to: { path: MODEL_SIDE, reachable: true },
    },
    layer('optimize-below-the-front-ends', '^optimize/', '^(pages|serve|cli)/|^index\\.ts$',
      'optimize/ (the compile driver, tuner, calibration) is below the CLI and beside serve/.'),
    layer('pages-render-data', '^pages/', '^(passes|codegen|optimize|serve|cli)/|^index\\.ts$',
      'pages/ renders plans and traces as HTML: compiler/ and runtime/ data, nothing of the compile path or the front ends.'),
    layer('serve-over-the-runtime', '^serve/', '^(passes|codegen|optimize|pages|cli)/|^index\\.ts$',
      'serve/ admits, limits and reports over the runtime\'s scheduler: runtime/ and compiler/ only.'),
    layer('api-is-not-the-cli', '^index\\.ts$', '^(cli|bin|optimize|passes|codegen|pages)/',
      'The package API (index.ts) exposes running plans and serving: not the CLI or the compile path.'),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist|build)/' },
    moduleSystems: ['es6'],
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'node', 'default'], extensions: ['.ts', '.mjs', '.js', '.json'] },
    skipAnalysisNotInRules: true,
    // Re-cruised only when a file's content changes (about 3 s instead of 10 on two busy cores).
    cache: { folder: 'node_modules/.cache/dependency-cruiser', strategy: 'content' },
  },
};
