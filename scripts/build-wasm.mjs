// Compiles the AssemblyScript kernels (src/kernels/wasm/assembly/) to build/kernels.wasm.
// Run by `npm run build` (and so by `npm install` through `prepare`); skips the compile when
// the .wasm is newer than every source file. Never writes anywhere but build/.
//
// The module imports its memory (env.memory): shared, so views into it never detach when it
// grows and worker threads can share it; declared maximum 65536 pages = 4 GiB, the most wasm32
// can address. The runtime (src/kernels/wasm/runtime.ts) picks the actual maximum at start-up.
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const sourceDir = join(root, 'src/kernels/wasm/assembly');
const entry = join(sourceDir, 'index.ts');
const outFile = join(root, 'build/kernels.wasm');
const force = process.argv.includes('--force');

if (!existsSync(entry)) {
  console.log('build-wasm: no AssemblyScript kernels yet; skipping');
  process.exit(0);
}
const newestSource = Math.max(
  ...readdirSync(sourceDir).map((f) => statSync(join(sourceDir, f)).mtimeMs),
  statSync(fileURLToPath(import.meta.url)).mtimeMs,
);
if (!force && existsSync(outFile) && statSync(outFile).mtimeMs > newestSource) process.exit(0);

mkdirSync(dirname(outFile), { recursive: true });
let asc;
try {
  asc = await import('assemblyscript/asc');
} catch (cause) {
  // An install without devDependencies: fine if a compiled module is already there.
  if (existsSync(outFile)) process.exit(0);
  console.error(`build-wasm: cannot load the AssemblyScript compiler (a devDependency) to build ${outFile}: ${cause}`);
  process.exit(1);
}
const args = [
  entry,
  '--outFile',
  outFile,
  '--optimizeLevel',
  '3',
  '--shrinkLevel',
  '0',
  '--runtime',
  'stub',
  '--noAssert',
  '--enable',
  'simd,threads',
  '--importMemory',
  '--sharedMemory',
  '--initialMemory',
  '1',
  '--maximumMemory',
  '65536',
];
const { error, stderr } = await asc.main(args, {});
if (error) {
  console.error(stderr.toString());
  process.exit(1);
}
console.log(`build-wasm: wrote ${outFile} (${statSync(outFile).size} bytes)`);
