// Compiles the AssemblyScript kernels (src/kernels/wasm/assembly/) to build/kernels.wasm.
// Run by `npm run build` (and so by `npm install` through `prepare`).
import { existsSync, mkdirSync } from 'node:fs';
const entry = 'src/kernels/wasm/assembly/index.ts';
if (!existsSync(entry)) {
  console.log('build-wasm: no AssemblyScript kernels yet; skipping');
  process.exit(0);
}
mkdirSync('build', { recursive: true });
const asc = await import('assemblyscript/asc');
const { error, stderr } = await asc.main([entry, '--outFile', 'build/kernels.wasm', '--optimizeLevel', '3', '--runtime', 'stub', '--enable', 'simd', '--noAssert'], {});
if (error) {
  console.error(stderr.toString());
  process.exit(1);
}
