// Builds llama.cpp's own tools (llama-server, llama-bench) natively from the source that
// node-llama-cpp ships (node_modules/node-llama-cpp/llama/gitRelease.bundle): the yardstick for
// the benchmarks and the real peer of the probe's e2e test. Cached under
// bench/results/llama-native/<first 12 hex of the bundle's sha256>/: rebuilt only when the bundle
// changes (or with --force). About 6 minutes on 2 idle cores.
//
//   node scripts/build-llama.mjs            build (or find) and print the bin directory
//   node scripts/build-llama.mjs --check    exit 0 when cached, 1 when not, 2 when it cannot build
//   --variant avx2                          llama.cpp's AVX2 build instead (GGML_NATIVE=OFF,
//                                           AVX512=OFF, AVX2, FMA, F16C), cached under <sha>-avx2/:
//                                           the yardstick for Tessera's AVX2 kernels (--cpu avx2)
//
//   --examples DIR                          llama.cpp's examples (llama-lookup, llama-speculative-simple,
//                                           llama-batched-bench) from the same bundle, built
//                                           under DIR (src/, build/, bin/), never into the shared
//                                           cache: bench:spec --llama reads DIR/bin (BENCH_LLAMA_EXAMPLES),
//                                           bench:decode's batch-16 row DIR/bin/llama-batched-bench
//
// Needs git, cmake and a C++ compiler; without one it says which, and exits 2 (never half-builds:
// the binaries are moved into place only after the build succeeded). Flags: GGML_NATIVE=ON (this
// CPU's instruction set, as a user building it here would; or the AVX2 set, --variant avx2),
// LLAMA_CURL=OFF (no network).
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bundle = join(root, 'node_modules/node-llama-cpp/llama/gitRelease.bundle');
const targets = ['llama-server', 'llama-bench'];

/** The builds: 'native' (this CPU's instruction set) or 'avx2' (llama.cpp's AVX2 + FMA + F16C path). */
const VARIANT_FLAGS = {
  native: ['-DGGML_NATIVE=ON'],
  avx2: ['-DGGML_NATIVE=OFF', '-DGGML_AVX512=OFF', '-DGGML_AVX2=ON', '-DGGML_FMA=ON', '-DGGML_F16C=ON'],
};

/** The directory holding the built binaries for this bundle and variant (whether or not they exist yet). */
export function llamaBinDir(variant = 'native') {
  const sha = createHash('sha256').update(readFileSync(bundle)).digest('hex').slice(0, 12);
  return join(root, 'bench/results/llama-native', variant === 'native' ? sha : `${sha}-${variant}`, 'bin');
}

const argVariant = process.argv.includes('--variant') ? process.argv[process.argv.indexOf('--variant') + 1] : 'native';

/** The tools the build needs that are missing from PATH. */
export function missingTools() {
  const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
  const missing = ['git', 'cmake'].filter((t) => !has(t));
  if (!has('c++') && !has('g++') && !has('clang++')) missing.push('g++');
  return missing;
}

function built(binDir) {
  return targets.every((t) => existsSync(join(binDir, t)));
}

function build(variant) {
  if (!(variant in VARIANT_FLAGS)) {
    console.error(`build-llama: --variant ${variant}: not one of ${Object.keys(VARIANT_FLAGS).join(', ')}`);
    process.exit(2);
  }
  if (!existsSync(bundle)) {
    console.error(`build-llama: ${bundle} is missing; run npm ci first`);
    process.exit(2);
  }
  const binDir = llamaBinDir(variant);
  if (!process.argv.includes('--force') && built(binDir)) return binDir;
  const missing = missingTools();
  if (missing.length > 0) {
    console.error(
      `build-llama: cannot build llama.cpp: ${missing.join(', ')} not found (apt-get install -y cmake g++ git)`,
    );
    process.exit(2);
  }
  const top = dirname(binDir);
  const src = join(top, 'src');
  const out = join(top, 'build');
  rmSync(src, { recursive: true, force: true });
  console.error(`build-llama: cloning ${bundle} into ${src}`);
  execFileSync('git', ['clone', '--quiet', bundle, src], { stdio: 'inherit' });
  const t0 = Date.now();
  const jobs = cmakeBuild(src, out, VARIANT_FLAGS[variant], ['-DLLAMA_BUILD_EXAMPLES=OFF'], targets);
  const staged = `${binDir}.partial`;
  rmSync(staged, { recursive: true, force: true });
  mkdirSync(staged, { recursive: true });
  for (const t of targets) cpSync(join(out, 'bin', t), join(staged, t));
  rmSync(binDir, { recursive: true, force: true });
  renameSync(staged, binDir);
  writeFileSync(join(top, 'built.txt'), `built in ${((Date.now() - t0) / 1000).toFixed(0)} s with -j ${jobs}\n`);
  rmSync(out, { recursive: true, force: true });
  rmSync(src, { recursive: true, force: true });
  console.error(`build-llama: built ${targets.join(', ')} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  return binDir;
}

/**
 * cmake's configure step for llama.cpp's source `src` into `out` (Release, static, no curl, no
 * tests; `variantFlags` the instruction set, `buildFlags` which programs), then the build of
 * `buildTargets` alone, -j BUILD_LLAMA_JOBS (2 by default). Returns the job count it used.
 */
function cmakeBuild(src, out, variantFlags, buildFlags, buildTargets) {
  const jobs = String(Math.max(1, Number(process.env['BUILD_LLAMA_JOBS'] ?? 0) || 2));
  const configure = [
    '-S',
    src,
    '-B',
    out,
    '-DCMAKE_BUILD_TYPE=Release',
    ...variantFlags,
    '-DLLAMA_CURL=OFF',
    '-DLLAMA_BUILD_TESTS=OFF',
    ...buildFlags,
    '-DBUILD_SHARED_LIBS=OFF',
  ];
  execFileSync('cmake', configure, { stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync('cmake', ['--build', out, '--config', 'Release', '-j', jobs, '--target', ...buildTargets], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return jobs;
}

/** The speculative-decoding examples under `dir` (its own clone and build, kept for a rebuild). */
function buildExamples(dir) {
  const examples = ['llama-lookup', 'llama-speculative-simple', 'llama-batched-bench'];
  const binDir = join(dir, 'bin');
  if (!process.argv.includes('--force') && examples.every((t) => existsSync(join(binDir, t)))) return binDir;
  const missing = missingTools();
  if (missing.length > 0) {
    console.error(`build-llama: cannot build llama.cpp: ${missing.join(', ')} not found`);
    process.exit(2);
  }
  const src = join(dir, 'src');
  const out = join(dir, 'build');
  if (!existsSync(src)) execFileSync('git', ['clone', '--quiet', bundle, src], { stdio: 'inherit' });
  const t0 = Date.now();
  cmakeBuild(src, out, VARIANT_FLAGS.native, ['-DLLAMA_BUILD_EXAMPLES=ON', '-DLLAMA_BUILD_SERVER=OFF'], examples);
  mkdirSync(binDir, { recursive: true });
  for (const t of examples) cpSync(join(out, 'bin', t), join(binDir, t));
  console.error(`build-llama: built ${examples.join(', ')} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  return binDir;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--examples')) {
    const dir = process.argv[process.argv.indexOf('--examples') + 1];
    if (dir === undefined || dir.startsWith('--')) {
      console.error('build-llama: --examples needs a directory (e.g. /tmp/tessera-llama-examples)');
      process.exit(2);
    }
    console.log(buildExamples(dir));
    process.exit(0);
  }
  if (process.argv.includes('--check')) {
    if (built(llamaBinDir(argVariant))) process.exit(0);
    process.exit(missingTools().length > 0 ? 2 : 1);
  }
  console.log(build(argVariant));
}
