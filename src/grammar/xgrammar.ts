// Loads xgrammar (the grammar engine vLLM and SGLang use) from `@mlc-ai/web-xgrammar`, its WASM
// build for JavaScript. Owns only the loading. Why this way: the package is a UMD bundle
// published with `"type": "module"`, so Node treats `lib/index.js` as ESM and `import` fails
// (the bundle uses `require`/`module.exports`). Evaluated as the CommonJS module it really is
// (a fresh `Module` compiled from the file's text), it works under Node 20.
// Must never be imported for its side effects: nothing loads until loadXgrammar() is called.
import { readFileSync } from 'node:fs';
import { createRequire, Module } from 'node:module';
import { dirname } from 'node:path';
import type * as Xgrammar from '@mlc-ai/web-xgrammar';
import { TesseraError } from '../core/index.js';

export type XgrammarModule = typeof Xgrammar;

interface CompilableModule {
  filename: string;
  paths: string[];
  _compile(source: string, filename: string): void;
  exports: unknown;
}
interface ModuleStatics {
  _nodeModulePaths(from: string): string[];
}

/** The xgrammar bundle, evaluated as CommonJS. Throws a TesseraError when it cannot be loaded. */
export function loadXgrammar(): XgrammarModule {
  try {
    const file = createRequire(import.meta.url).resolve('@mlc-ai/web-xgrammar');
    const mod = new Module(file) as unknown as CompilableModule;
    mod.filename = file;
    mod.paths = (Module as unknown as ModuleStatics)._nodeModulePaths(dirname(file));
    mod._compile(readFileSync(file, 'utf8'), file);
    const exports = mod.exports as Partial<XgrammarModule>;
    if (typeof exports.GrammarCompiler !== 'function') throw new Error('the bundle exports no GrammarCompiler');
    return exports as XgrammarModule;
  } catch (error) {
    throw new TesseraError(
      'internal',
      `cannot load xgrammar (@mlc-ai/web-xgrammar): ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}
