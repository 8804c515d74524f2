// Node module hooks that let benchmarks run TypeScript sources directly (Node 20 has no type
// stripping): `.js` imports resolve to the `.ts` file beside them, and `.ts` files are
// transpiled with the project's TypeScript (types erased, no type check). Registered by
// register-ts.mjs; dev-only, never used by the server.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export async function resolve(specifier, context, next) {
  const parent = context.parentURL;
  if (
    parent?.endsWith('.ts') &&
    specifier.endsWith('.js') &&
    (specifier.startsWith('.') || specifier.startsWith('/'))
  ) {
    const candidate = new URL(specifier.replace(/\.js$/, '.ts'), parent);
    if (existsSync(fileURLToPath(candidate))) return { url: candidate.href, shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!url.endsWith('.ts')) return next(url, context);
  const fileName = fileURLToPath(url);
  const { outputText } = ts.transpileModule(await readFile(fileName, 'utf8'), {
    fileName,
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2022,
      inlineSourceMap: true,
      esModuleInterop: true,
    },
  });
  return { format: 'module', source: outputText, shortCircuit: true };
}
