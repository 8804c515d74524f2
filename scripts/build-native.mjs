// Compiles Tessera's native kernels (src/kernels/native/*.c, a Node-API addon) to
// build/tessera-native.node with the C compiler it finds (`cc`, or $CC): the glue (dense.c,
// attention.c) for baseline x86-64, and each instruction-set variant's kernels in their own
// translation units with their own -m flags (VARIANTS), linked into the one addon, which picks
// the variant by CPUID at load (or as forced: --cpu). Run by `npm run build`
// (and so by `npm install` through `prepare`). Skips the compile when the addon is newer than its
// source. Never fails the build: without a compiler, or on a CPU or OS the kernels do not
// support, it prints why and Tessera runs the wasm kernels instead (src/kernels/choose.ts decides,
// at start-up; `tessera plan` prints the table). Never writes anywhere but build/.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = join(root, 'src/kernels/native');
/** Each source with the -m flags it is compiled with ([]: baseline x86-64, runs on any CPU). */
const AVX512 = ['-mavx512f', '-mavx512bw', '-mavx512vl', '-mavx512vnni', '-mavx2', '-mfma', '-mf16c'];
const AVX2 = ['-mavx2', '-mfma', '-mf16c'];
// rowops.c repeats the wasm kernels' arithmetic bit for bit: no fused multiply-add, ever.
const ROWOPS = ['-mavx2', '-mf16c', '-ffp-contract=off'];
// experts.c fuses only the multiply-adds it writes as intrinsics.
const EXPERTS = ['-mavx2', '-mfma', '-mf16c', '-ffp-contract=off'];
const UNITS = [
  ['dense.c', []],
  ['attention.c', []],
  ['attention-layer.c', ['-ffp-contract=off']],
  ['argmax.c', []],
  ['mapfile.c', []],
  ['dense-avx512.c', AVX512],
  ['attention-avx512.c', AVX512],
  ['dense-avx2.c', AVX2],
  ['attention-avx2.c', AVX2],
  ['rowops.c', ROWOPS],
  ['lora.c', AVX2],
  ['experts.c', EXPERTS],
  ['experts-kquant.c', EXPERTS],
].filter(([name]) => existsSync(join(dir, name)));
const sources = [
  ...UNITS.map(([name]) => join(dir, name)),
  ...['dense.h', 'attention.h', 'experts.h', 'napi-args.h'].map((h) => join(dir, h)).filter((h) => existsSync(h)),
];
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
const objDir = mkdtempSync(join(tmpdir(), 'tessera-native-'));
try {
  const objects = UNITS.map(([name, flags]) => {
    const obj = join(objDir, name.replace(/\.c$/, '.o'));
    execFileSync(
      cc,
      ['-O3', '-std=gnu11', '-fPIC', '-Wall', '-Wextra', ...flags, '-I', include, '-c', '-o', obj, join(dir, name)],
      {
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    );
    return obj;
  });
  execFileSync(cc, ['-shared', '-o', partial, ...objects, '-lm', '-lpthread'], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  renameSync(partial, outFile);
} catch (cause) {
  console.log(`build-native: ${cc} could not build ${outFile} (${cause.message}); the wasm kernels will run instead`);
} finally {
  rmSync(objDir, { recursive: true, force: true });
}
