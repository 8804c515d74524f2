// On a machine without SPIN (or gcc), `npm test` says at once what is missing and how to install
// it (npm's pretest runs spec/scripts/require-tools.mjs), rather than eight conformance tests
// failing minutes later with "spin ... failed (null)"; a direct run of the model's helpers says
// the same. PATH here holds only node.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
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
