// On a machine without SPIN (or gcc, chromium, dnsmasq, iproute2, cmake, g++, git), `npm test` installs them when it
// runs as root with apt-get (npm's pretest runs scripts/require-tools.mjs), or else says at once what
// is missing and the command that installs it, rather than eight conformance tests failing minutes
// later with "spin ... failed (null)"; a direct run of the model's helpers says the same. PATH here
// holds only node (and, where a test says so, a stand-in apt-get that records what it was asked).
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const bare = mkdtempSync(join(tmpdir(), 'tessera-nospin-'));
symlinkSync(process.execPath, join(bare, 'node'));
afterAll(() => rmSync(bare, { recursive: true, force: true }));

const runBare = (args: string[]) => spawnSync(join(bare, 'node'), args, { encoding: 'utf8', env: { PATH: bare } });

describe('the formal model on a machine without its tools', () => {
  it('npm test stops first, naming each missing tool and its apt-get line', () => {
    const r = runBare(['spec/scripts/require-tools.mjs']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("'spin' is not installed (apt-get install -y spin)");
    expect(r.stderr).toContain("'gcc' is not installed (apt-get install -y gcc)");
  });

  it('a simulation started anyway fails with the same advice, not "failed (null)"', () => {
    const r = runBare([
      '--input-type=module',
      '-e',
      "import('./spec/scripts/pan.mjs').then((m) => m.simulate({ seed: 1 })).catch((e) => { console.error(e.message); process.exit(3); })",
    ]);
    expect(r.status).toBe(3);
    expect(r.stderr).toContain("'spin' is not installed (apt-get install -y spin)");
    expect(r.stderr).not.toMatch(/failed \(null\)/);
  });

  it('with the tools on PATH, the check passes', () => {
    const r = spawnSync(process.execPath, ['spec/scripts/require-tools.mjs'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
  });
});

describe("npm test's system tools", () => {
  const script = 'scripts/require-tools.mjs';

  it('without apt-get, names each missing tool and the one command that installs them, and stops', () => {
    const r = spawnSync(join(bare, 'node'), [script], { encoding: 'utf8', env: { PATH: bare } });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("'spin' is not installed (apt-get install -y spin)");
    expect(r.stderr).toContain("'dnsmasq' is not installed (apt-get install -y dnsmasq)");
    expect(r.stderr).toContain("'ip' is not installed (apt-get install -y iproute2)");
    expect(r.stderr).toContain("'cmake' is not installed (apt-get install -y cmake)");
    expect(r.stderr).toMatch(
      /apt-get update && apt-get install -y --no-install-recommends spin gcc .*dnsmasq iproute2 cmake g\+\+ git/,
    );
  });

  it('as root with apt-get, installs exactly what is missing, says so, and goes on', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-apt-'));
    try {
      symlinkSync(process.execPath, join(dir, 'node'));
      // A stand-in apt-get: records its arguments; `install` puts an executable per package's tool on PATH.
      const tools: Record<string, string> = {
        spin: 'spin',
        gcc: 'gcc',
        dnsmasq: 'dnsmasq',
        iproute2: 'ip',
        cmake: 'cmake',
        'g++': 'g++',
        git: 'git',
        'gcc-aarch64-linux-gnu': 'aarch64-linux-gnu-gcc',
        'qemu-user': 'qemu-aarch64',
      };
      writeFileSync(
        join(dir, 'apt-get'),
        `#!${join(dir, 'node')}
const fs = require('node:fs');
const args = process.argv.slice(2);
fs.appendFileSync(${JSON.stringify(join(dir, 'calls.log'))}, args.join(' ') + ${JSON.stringify('\n')});
const tools = ${JSON.stringify(tools)};
if (args[0] === 'install') for (const p of args.slice(1)) if (tools[p]) {
  fs.writeFileSync(${JSON.stringify(dir)} + '/' + tools[p], ${JSON.stringify('#!/bin/sh\nexit 0\n')});
  fs.chmodSync(${JSON.stringify(dir)} + '/' + tools[p], 0o755);
}
`,
      );
      chmodSync(join(dir, 'apt-get'), 0o755);
      const r = spawnSync(join(dir, 'node'), [script], { encoding: 'utf8', env: { PATH: dir } });
      if (process.getuid?.() !== 0) {
        // Not root: no install is tried, the advice stands.
        expect(r.status).toBe(2);
        return;
      }
      expect(r.stderr).toMatch(/installing spin gcc .*dnsmasq iproute2 cmake g\+\+ git with apt-get \(running as root/);
      expect(r.status).toBe(0);
      const calls = readFileSync(join(dir, 'calls.log'), 'utf8').trim().split('\n');
      expect(calls[0]).toBe('update');
      expect(calls[1]).toMatch(/^install -y --no-install-recommends spin gcc( \S+)* dnsmasq iproute2 cmake g\+\+ git$/);
      // With everything there, nothing is installed.
      rmSync(join(dir, 'calls.log'));
      const again = spawnSync(join(dir, 'node'), [script], { encoding: 'utf8', env: { PATH: dir } });
      expect(again.status).toBe(0);
      expect(again.stderr).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('with TESSERA_NO_INSTALL=1 it only advises', () => {
    const r = spawnSync(join(bare, 'node'), [script], {
      encoding: 'utf8',
      env: { PATH: bare, TESSERA_NO_INSTALL: '1' },
    });
    expect(r.status).toBe(2);
    expect(r.stderr).not.toContain('installing');
  });
});
