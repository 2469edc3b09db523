// Code-shape metrics for the architecture notes: source files per folder and the longest functions (TypeScript via
// the compiler's AST, C++ by brace matching of top-level function bodies). `node --import tsx scripts/code-metrics.ts [ROOT]`.
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

const root = path.resolve(process.argv[2] ?? '.');
const SKIP = new Set(['node_modules', 'build', 'build-tests', '.git', 'golden', 'results']);

function walk(dir: string, out: string[] = []): string[] {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(e.name) || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (/\.(ts|cc|h|cuh|c)$/.test(e.name)) out.push(p);
  }
  return out;
}

interface Fn {
  file: string;
  name: string;
  lines: number;
}

function tsFunctions(file: string): Fn[] {
  const src = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const out: Fn[] = [];
  const visit = (n: ts.Node) => {
    if (ts.isFunctionLike(n) && 'body' in n && n.body) {
      const start = src.getLineAndCharacterOfPosition(n.getStart()).line;
      const end = src.getLineAndCharacterOfPosition(n.getEnd()).line;
      const name = (n as ts.FunctionLikeDeclaration).name?.getText(src) ?? '(anonymous)';
      out.push({ file, name, lines: end - start + 1 });
    }
    ts.forEachChild(n, visit);
  };
  visit(src);
  return out;
}

/** Bodies that open on a line ending in `) {` / `) const {` at brace depth 0 or inside a namespace. */
function cppFunctions(file: string): Fn[] {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const out: Fn[] = [];
  let depth = 0;
  let open: { name: string; line: number; depth: number } | undefined;
  lines.forEach((l, i) => {
    const code = l
      .replace(/\/\/.*$/, '')
      .replace(/"(?:\\.|[^"\\])*"/g, '""')
      .replace(/'(?:\\.|[^'\\])*'/g, "''");
    if (
      !open &&
      /\)\s*(const\s*)?(noexcept\s*)?(->\s*[\w:<>]+\s*)?\{\s*$/.test(code) &&
      !/^\s*(if|for|while|switch|else|do)\b/.test(code) &&
      !/[=;]\s*\[/.test(code)
    ) {
      const m = /([\w:~]+)\s*\(/.exec(code);
      if (m && !/^(if|for|while|switch|return)$/.test(m[1]!)) open = { name: m[1]!, line: i, depth };
    }
    for (const c of code) {
      if (c === '{') depth++;
      else if (c === '}') {
        depth--;
        if (open && depth === open.depth) {
          out.push({ file, name: open.name, lines: i - open.line + 1 });
          open = undefined;
        }
      }
    }
  });
  return out;
}

const files = walk(root);
const perFolder = new Map<string, number>();
for (const f of files) {
  const d = path.relative(root, path.dirname(f)) || '.';
  perFolder.set(d, (perFolder.get(d) ?? 0) + 1);
}
const fns = files.flatMap((f) => (f.endsWith('.ts') ? tsFunctions(f) : cppFunctions(f)));
const src = (lang: RegExp) =>
  fns.filter((f) => lang.test(f.file) && !/\/(test|bench)\//.test(path.relative(root, f.file) + '/'));
const top = (list: Fn[], n: number) =>
  [...list]
    .sort((a, b) => b.lines - a.lines)
    .slice(0, n)
    .map((f) => `  ${String(f.lines).padStart(4)}  ${path.relative(root, f.file)} ${f.name}`);
console.log(`source files per folder (${files.length} in all):`);
for (const [d, n] of [...perFolder].sort()) console.log(`  ${String(n).padStart(3)}  ${d}`);
console.log('longest TypeScript functions outside test/ and bench/:');
console.log(top(src(/\.ts$/), 5).join('\n'));
console.log('longest C++/CUDA functions outside test/:');
console.log(top(src(/\.(cc|h|cuh|c)$/), 5).join('\n'));
