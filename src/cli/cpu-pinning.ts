// `tessera up --cpus prefill=0,decode=1,router=0`: which CPUs each role's processes may run on,
// so prefill and decode do not fight over cores (vLLM's disagg_benchmarks pin them the same way).
// The router may be pinned too, but on a small machine an unpinned router relays tokens with a
// shorter tail than one that shares the prefill's core (bench/pd.ts has the figures).
// Owns: parsing the flag and turning one role's pin into the command that starts it (taskset
// from util-linux, which sets the affinity and then execs the program: the pid stays the child's).
// A role left out runs anywhere. Must never start a process itself.
import { existsSync } from 'node:fs';
import { ConfigError } from '../core/index.js';

export const PINNED_ROLES = ['prefill', 'decode', 'router'] as const;
export type PinnedRole = (typeof PINNED_ROLES)[number];

/** Role -> a CPU list in taskset's syntax ("0", "2-3", "0+2" for 0 and 2). */
export type CpuPins = ReadonlyMap<PinnedRole, string>;

const TASKSET_PATHS = ['/usr/bin/taskset', '/bin/taskset'];

export function parseCpuPins(value: string | undefined): CpuPins {
  const pins = new Map<PinnedRole, string>();
  if (value === undefined) return pins;
  for (const part of value.split(',')) {
    const m = /^(prefill|decode|router)=(\d+(?:-\d+)?(?:\+\d+(?:-\d+)?)*)$/.exec(part.trim());
    if (m === null) {
      throw new ConfigError(
        `--cpus: "${part}" is not ROLE=CPUS (roles prefill, decode, router; CPUS like 0, 2-3 or 0+2), e.g. --cpus prefill=0,decode=1`,
      );
    }
    const role = m[1] as PinnedRole;
    if (pins.has(role)) throw new ConfigError(`--cpus names ${role} twice`);
    pins.set(role, (m[2] as string).replaceAll('+', ','));
  }
  return pins;
}

/** The executable and arguments that start `command args` on the role's CPUs (as is when unpinned). */
export function pinnedCommand(
  pins: CpuPins,
  role: PinnedRole,
  command: string,
  args: readonly string[],
): { command: string; args: string[] } {
  const cpus = pins.get(role);
  if (cpus === undefined) return { command, args: [...args] };
  const taskset = TASKSET_PATHS.find((p) => existsSync(p));
  if (taskset === undefined) {
    throw new ConfigError(
      '--cpus needs taskset (util-linux: apt-get install util-linux), which is not installed; leave --cpus out to run unpinned',
    );
  }
  return { command: taskset, args: ['-c', cpus, command, ...args] };
}
