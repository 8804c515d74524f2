// Kept in test/, not beside its sources: it runs the cross compiler and qemu, and src/ allows child_process only at the edges.
// The NEON (dotprod) dot products (dot-neon.c) cross-compiled for aarch64 and run under
// qemu-aarch64 against scalar reference values (dot-neon-test.c), with its negative control: one
// weight code flipped must fail. Skipped, saying why, where Debian's gcc-aarch64-linux-gnu and
// qemu-user are not installed (apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const here = join(dirname(fileURLToPath(import.meta.url)), '../../src/kernels/native/neon');
const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
const tools = has('aarch64-linux-gnu-gcc') && has('qemu-aarch64');
const dir = mkdtempSync(join(tmpdir(), 'tessera-neon-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!tools)('NEON dotprod q4_0 / q8_0 dot products under qemu-aarch64', () => {
  const exe = join(dir, 'dot-neon-test');
  const run = (env: NodeJS.ProcessEnv) => spawnSync('qemu-aarch64', [exe], { env, encoding: 'utf8' });

  it('compile for armv8.2-a+dotprod and match the scalar reference bit for bit', () => {
    execFileSync('aarch64-linux-gnu-gcc', [
      '-O2',
      '-march=armv8.2-a+dotprod',
      '-static',
      '-Wall',
      '-Wextra',
      '-Werror',
      '-o',
      exe,
      join(here, 'dot-neon.c'),
      join(here, 'dot-neon-test.c'),
      '-lm',
    ]);
    const ok = run({});
    expect(ok.stdout).toMatch(/^ok: 48 checks, 0 failures/m);
    expect(ok.status).toBe(0);
  });

  it('fail when one weight code is flipped (the negative control)', () => {
    const broken = run({ NEON_TEST_BREAK: '1' });
    expect(broken.status).toBe(1);
    expect(broken.stdout).toMatch(/FAIL q4_0/);
  });
});
