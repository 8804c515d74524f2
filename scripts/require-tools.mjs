// `npm test`'s first step (npm's pretest): the system tools the tests need, installed when this
// process can install them, or named with the exact command when it cannot.
//   spin, gcc, libc6-dev  the formal model's checks (SPIN writes C that gcc compiles) and the native kernels
//   gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user  the NEON kernels cross-compiled and run under qemu
//   chromium              the dashboard's and the probe's browser tests (puppeteer-core drives it)
//   dnsmasq, iproute2     test/e2e/cluster: each role on its own network-namespace host, DNS by dnsmasq
//   cmake, g++, git       llama.cpp's llama-server built from node-llama-cpp's bundled source (scripts/build-llama.mjs):
//                         the probe's real peer in test/e2e/probe/llama-server.test.ts
// As root with apt-get on PATH it runs `apt-get update` and `apt-get install` for what is missing and
// says so first; otherwise it prints the command to run and exits 2, before any test starts.
// TESSERA_NO_INSTALL=1 turns the installing off (only the advice remains).
// Must never install anything that is already there, or report success while a tool is missing.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Each need: how to tell it is there, the Debian package that brings it, what wants it. */
const NEEDS = [
  { name: 'spin', there: () => onPath('spin'), pkg: 'spin', why: 'the formal model cannot be checked' },
  { name: 'gcc', there: () => onPath('gcc'), pkg: 'gcc', why: 'the formal model cannot be checked' },
  {
    name: 'the C library headers',
    there: () => existsSync('/usr/include/stdlib.h'),
    pkg: 'libc6-dev',
    why: 'gcc cannot build the model checker or the native kernels',
  },
  {
    name: 'aarch64-linux-gnu-gcc',
    there: () => onPath('aarch64-linux-gnu-gcc'),
    pkg: 'gcc-aarch64-linux-gnu',
    why: "the NEON kernels' cross-compiled test cannot build",
  },
  {
    // The cross compiler's own C library headers: gcc-aarch64-linux-gnu only recommends them, and
    // --no-install-recommends leaves a compiler that cannot include <stdint.h>.
    name: 'the aarch64 C library headers',
    there: () => existsSync('/usr/aarch64-linux-gnu/include/stdlib.h'),
    pkg: 'libc6-dev-arm64-cross',
    why: "the NEON kernels' cross-compiled test cannot build",
  },
  {
    name: 'qemu-aarch64',
    there: () => onPath('qemu-aarch64'),
    pkg: 'qemu-user',
    why: "the NEON kernels' test cannot run",
  },
  {
    name: 'chromium',
    there: () => onPath('chromium') || existsSync(process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium'),
    pkg: 'chromium',
    why: "the dashboard's and the probe's browser tests cannot run",
  },
  { name: 'dnsmasq', there: () => onPath('dnsmasq'), pkg: 'dnsmasq', why: 'the cluster tests have no DNS server' },
  { name: 'ip', there: () => onPath('ip'), pkg: 'iproute2', why: 'the cluster tests cannot make their hosts' },
  {
    name: 'cmake',
    there: () => onPath('cmake'),
    pkg: 'cmake',
    why: "llama-server (the probe test's peer) cannot be built",
  },
  { name: 'g++', there: () => onPath('g++') || onPath('c++'), pkg: 'g++', why: 'llama-server cannot be built' },
  { name: 'git', there: () => onPath('git'), pkg: 'git', why: "llama.cpp's bundled source cannot be cloned" },
];

function onPath(tool) {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    if (dir === '') continue;
    try {
      accessSync(join(dir, tool), constants.X_OK);
      return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}

const missingNow = () => NEEDS.filter((n) => !n.there());

let missing = missingNow();
if (missing.length > 0) {
  const pkgs = [...new Set(missing.map((n) => n.pkg))];
  const canInstall = process.getuid?.() === 0 && onPath('apt-get') && process.env['TESSERA_NO_INSTALL'] !== '1';
  if (canInstall) {
    console.error(
      `npm test: ${missing.map((n) => n.name).join(', ')} missing; installing ${pkgs.join(' ')} with apt-get ` +
        '(running as root; TESSERA_NO_INSTALL=1 to stop this)',
    );
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const update = spawnSync('apt-get', ['update'], { stdio: ['ignore', 'ignore', 'inherit'], env });
    const install =
      update.status === 0
        ? spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...pkgs], {
            stdio: ['ignore', 'ignore', 'inherit'],
            env,
          })
        : update;
    if (install.status !== 0) console.error(`npm test: apt-get failed (exit ${install.status ?? install.signal})`);
    missing = missingNow();
  }
  if (missing.length > 0) {
    for (const n of missing)
      console.error(`npm test: '${n.name}' is not installed (apt-get install -y ${n.pkg}); ${n.why}.`);
    const all = [...new Set(missing.map((n) => n.pkg))].join(' ');
    console.error(
      `npm test: run \`apt-get update && apt-get install -y --no-install-recommends ${all}\` (as root), then npm test again.`,
    );
    process.exit(2);
  }
}
