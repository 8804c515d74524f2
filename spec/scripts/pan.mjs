// Runs SPIN on spec/tessera.pml (or spec/lease.pml, the prefix lease model): `spin -a` generates
// the verifier, gcc compiles it, ./pan searches. Owns the temp directory of each run (created
// under the OS temp dir, removed after) and the parsing of pan's report. Never writes inside the
// repository, and never reports a run as passed unless pan searched the whole space (no
// truncation, no memory exhaustion).
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SPEC_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');
export const MODEL = join(SPEC_DIR, 'tessera.pml');
/** The files tessera.pml includes. */
export const MODEL_PARTS = join(SPEC_DIR, 'model');
/** The prefix lease / evict / read model (one file, beside tessera.pml). */
export const LEASE_MODEL = join(SPEC_DIR, 'lease.pml');

/** Fails with a clear message when spin or gcc is missing. */
export function requireTools() {
  const missing = [];
  for (const [tool, args, hint] of [
    ['spin', ['-V'], 'apt-get install -y spin'],
    ['gcc', ['--version'], 'apt-get install -y gcc'],
  ]) {
    const r = spawnSync(tool, args, { encoding: 'utf8' });
    if (r.error || r.status !== 0)
      missing.push(`spec: '${tool}' is not installed (${hint}); the formal model cannot be checked.`);
  }
  if (missing.length > 0) {
    console.error(missing.join('\n'));
    process.exit(2);
  }
}

/**
 * One verification run.
 * @param {object} o
 * @param {'tessera'|'lease'} [o.model]  which model: tessera.pml (the default) or lease.pml
 * @param {string[]} [o.defines]   -D flags for spin (model sizes, mutants), e.g. ['MAXF=1']
 * @param {'safety'|'liveness'} o.mode  safety: assertions + invalid end states, no claim;
 *                                      liveness: the ltl claim with -a, plus assertions
 * @param {boolean} [o.optimize]   gcc -O2 (long runs) or -O0 (short runs: compiles 7x faster)
 * @param {number} [o.hashBits]    pan -w
 * @param {number} [o.memLimitMb]  pan's memory limit
 * @param {boolean} [o.bfs]        breadth-first (safety only): the first counterexample found
 *                                 is a shortest one
 * @param {boolean} [o.keepTrail]  replay the counterexample and return its EV lines
 * @param {number} [o.timeoutSec]  stop pan after this long (the result is then incomplete)
 */
export function verify(o) {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-spec-'));
  const started = process.hrtime.bigint();
  try {
    copyModel(dir);
    const file = o.model === 'lease' ? 'lease.pml' : 'tessera.pml';
    const dflags = (o.defines ?? []).map((d) => `-D${d}`);
    if (o.mode === 'safety') dflags.push('-DNO_LTL');
    run('spin', [...dflags, '-a', file], dir);
    const cflags = [o.optimize ? '-O2' : '-O0', '-DCOLLAPSE', `-DMEMLIM=${o.memLimitMb ?? 4096}`, '-o', 'pan', 'pan.c'];
    if (o.mode === 'safety') cflags.unshift('-DSAFETY');
    if (o.bfs) cflags.unshift('-DBFS');
    run('gcc', cflags, dir);
    const panArgs = ['-m1000000', `-w${o.hashBits ?? 22}`];
    if (o.mode === 'liveness') panArgs.unshift('-a');
    const pan = spawnSync('./pan', panArgs, {
      cwd: dir,
      encoding: 'utf8',
      maxBuffer: 64 << 20,
      ...(o.timeoutSec === undefined ? {} : { timeout: o.timeoutSec * 1000, killSignal: 'SIGINT' }),
    });
    const timedOut = pan.error !== undefined || pan.signal !== null;
    const report = parsePan(`${pan.stdout ?? ''}${pan.stderr ?? ''}`);
    if (timedOut) report.complete = false;
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    // spin -t replays the counterexample, printing the EV lines and "assertion violated" at the
    // violation (model-trace.ts cuts the trace there).
    const trail = o.keepTrail && report.violation ? run('spin', [...dflags, '-t', '-T', file], dir) : undefined;
    return { ...report, seconds, timedOut, trail };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A random simulation of the model (spin -T -n<seed>): spin's output, EV lines included. */
export function simulate({ seed, defines = [], maxSteps = 20000 }) {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-sim-'));
  try {
    copyModel(dir);
    return run(
      'spin',
      [...defines.map((d) => `-D${d}`), '-DNO_LTL', '-T', `-n${seed}`, `-u${maxSteps}`, 'tessera.pml'],
      dir,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function copyModel(dir) {
  copyFileSync(MODEL, join(dir, 'tessera.pml'));
  copyFileSync(LEASE_MODEL, join(dir, 'lease.pml'));
  cpSync(MODEL_PARTS, join(dir, 'model'), { recursive: true });
}

function run(cmd, args, cwd) {
  try {
    return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 256 << 20 });
  } catch (e) {
    const err = /** @type {any} */ (e);
    if (err.code === 'ENOENT')
      throw new Error(`'${cmd}' is not installed (apt-get install -y ${cmd}); the formal model cannot be checked.`);
    throw new Error(`${cmd} ${args.join(' ')} failed (${err.status}):\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  }
}

/** Parses pan's report into numbers; `complete` is false when the search was cut short. */
export function parsePan(text) {
  const num = (re) => {
    const m = text.match(re);
    return m ? Number(m[1]) : undefined;
  };
  const vm = text.match(/^pan:1: (.*?) \(at depth (\d+)\)/m);
  const violation = vm ? { message: vm[1].trim(), depth: Number(vm[2]) } : undefined;
  const truncated = /max search depth too small/.test(text);
  const outOfMemory = /out of memory|memory limit/i.test(text) && !/errors: \d+/.test(text);
  // A run stopped early prints only progress lines ("Depth= ... States= 9e+06 Transitions= ...").
  const progress = [...text.matchAll(/States=\s*([\d.e+]+)\s+Transitions=\s*([\d.e+]+)\s+Memory=\s*([\d.]+)/g)].at(-1);
  return {
    errors: num(/errors: (\d+)/),
    stateVectorBytes: num(/State-vector (\d+) byte/),
    depthReached: num(/depth reached (\d+)/),
    statesStored: num(/^\s*([\d.e+]+) states, stored/m) ?? (progress && Number(progress[1])),
    transitions: num(/^\s*([\d.e+]+) transitions/m) ?? (progress && Number(progress[2])),
    memoryMb: num(/^\s*([\d.]+)\s+total actual memory usage/m) ?? (progress && Number(progress[3])),
    violation,
    complete: !truncated && !outOfMemory && !/Search not completed/.test(text),
    truncated,
    outOfMemory,
    text,
  };
}

/** Formats a count the way people read it: 4613354 -> "4,613,354". */
export function fmt(n) {
  return n === undefined ? '?' : Math.round(n).toLocaleString('en-US');
}
