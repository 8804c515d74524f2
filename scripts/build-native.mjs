// Compiles Tessera's native kernels (src/kernels/native/dense.c and attention.c, a Node-API addon) to
// build/tessera-native.node with the C compiler it finds (`cc`, or $CC). Run by `npm run build`
// (and so by `npm install` through `prepare`). Skips the compile when the addon is newer than its
// source. Never fails the build: without a compiler, or on a CPU or OS the kernels do not
// support, it prints why and Tessera runs the wasm kernels instead (src/kernels/choose.ts decides,
// at start-up; `tessera plan` prints the table). Never writes anywhere but build/.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const sources = ['dense.c', 'attention.c'].map((name) => join(root, 'src/kernels/native', name));
const outFile = join(root, 'build/tessera-native.node');
const force = process.argv.includes('--force');

if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.log(
    `build-native: the native kernels are for x86-64 Linux, not ${process.platform}/${process.arch}; skipping`,
  );
  process.exit(0);
}
const newest = Math.max(...sources.map((s) => statSync(s).mtimeMs), statSync(fileURLToPath(import.meta.url)).mtimeMs);
if (!force && existsSync(outFile) && statSync(outFile).mtimeMs > newest) process.exit(0);

/** node_api.h: beside the running node, else from the node-api-headers package. */
function includeDir() {
  const besideNode = join(dirname(process.execPath), '..', 'include', 'node');
  if (existsSync(join(besideNode, 'node_api.h'))) return besideNode;
  try {
    const pkg = createRequire(import.meta.url).resolve('node-api-headers/package.json');
    return join(dirname(pkg), 'include');
  } catch {
    return null;
  }
}

const include = includeDir();
if (include === null) {
  console.log('build-native: no node_api.h (neither beside node nor from node-api-headers); skipping');
  process.exit(0);
}
const cc = process.env['CC'] ?? 'cc';
mkdirSync(dirname(outFile), { recursive: true });
const partial = `${outFile}.partial`;
try {
  execFileSync(
    cc,
    ['-O3', '-std=gnu11', '-fPIC', '-shared', '-Wall', '-Wextra', '-I', include, '-o', partial, ...sources, '-lm'],
    {
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  renameSync(partial, outFile);
} catch (cause) {
  console.log(`build-native: ${cc} could not build ${outFile} (${cause.message}); the wasm kernels will run instead`);
}
