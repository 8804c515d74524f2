// E2E support: real hosts for a test, as Linux network namespaces on one bridge. Each host is a
// namespace `tsn-<pid>-<name>` with its own veth into the bridge `tsb<pid>` and its own address
// 10.213.<K>.<n>/24 (K picked free per test file); the test process reaches them over the
// bridge's 10.213.<K>.1 (the "client host"), and no route leads anywhere else. Processes run in a
// host with `ip netns exec` (the same pid: `ip` execs the command), so kill -9 and SIGSTOP work
// as on loopback. A host's link can be set down and up again (the bridge side of its veth: the
// host vanishes from the network without any socket being closed). A host may get its own
// /etc/resolv.conf (via /etc/netns/<ns>/, which `ip netns exec` bind-mounts).
// Owns: creating and deleting the namespaces, veths, bridge and /etc/netns dirs of this test
// file; also on failure (an exit hook deletes them synchronously), and leftovers of test
// processes that are gone (swept at creation). Never touches an interface or namespace it did
// not name.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';

const IP = 'ip';

function ip(...args: string[]): string {
  return execFileSync(IP, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function tryIp(...args: string[]): void {
  try {
    ip(...args);
  } catch {
    // already gone
  }
}

export interface Host {
  readonly name: string;
  readonly ns: string;
  readonly ip: string;
  /** The command prefix that runs argv inside this host. */
  readonly wrap: readonly string[];
  /** The host's link to the bridge goes down (nothing is closed: packets are simply lost), or back up. */
  linkDown(): void;
  linkUp(): void;
  /** Writes this host's /etc/resolv.conf (seen by processes started in it afterwards). */
  resolveVia(nameserver: string): void;
}

export interface Lan {
  /** 10.213.K.1: the test process's own address on the bridge. */
  readonly gateway: string;
  host(name: string): Host;
  /** Deletes every namespace, veth and /etc/netns dir this Lan made (stop the processes in them first). */
  close(): void;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Deletes namespaces and bridges left by test processes that are gone. */
function sweep(): void {
  for (const line of ip('netns', 'list').split('\n')) {
    const match = /^tsn-(\d+)-\S+/.exec(line);
    if (match !== null && !alive(Number(match[1]))) {
      tryIp('netns', 'del', match[0]);
      rmSync(`/etc/netns/${match[0]}`, { recursive: true, force: true });
    }
  }
  for (const line of ip('-o', 'link', 'show', 'type', 'bridge').split('\n')) {
    const match = /^\d+: tsb(\d+)[:@]/.exec(line);
    if (match !== null && !alive(Number(match[1]))) tryIp('link', 'del', `tsb${match[1]}`);
  }
}

/** Why namespaces cannot be made here, or undefined when they can (tries one and deletes it). */
export function namespacesUnavailable(): string | undefined {
  const probe = `tsn-${process.pid}-probe`;
  try {
    ip('netns', 'add', probe);
    ip('netns', 'del', probe);
    return undefined;
  } catch (e) {
    return `network namespaces cannot be made here (${(e as Error).message.split('\n')[0]}); run as root with iproute2`;
  }
}

function freeSubnet(after: number): number {
  const used = ip('-4', '-o', 'addr', 'show');
  for (let k = after; ; k = k >= 250 ? 10 : k + 1) {
    if (!used.includes(`10.213.${k}.`)) return k;
  }
}

/** Puts 10.213.K.1/24 on bridge for a K no other interface has; two test files racing for one K: the later one moves on. */
function claimSubnet(bridge: string): number {
  for (let k = freeSubnet(10 + (process.pid % 200)); ; k = freeSubnet(k >= 250 ? 10 : k + 1)) {
    ip('addr', 'add', `10.213.${k}.1/24`, 'dev', bridge);
    const holders = ip('-4', '-o', 'addr', 'show')
      .split('\n')
      .filter((line) => line.includes(` 10.213.${k}.`));
    if (holders.length === 1) return k;
    ip('addr', 'del', `10.213.${k}.1/24`, 'dev', bridge);
  }
}

export function createLan(): Lan {
  sweep();
  const pid = process.pid;
  const bridge = `tsb${pid}`;
  const namespaces: string[] = [];
  let next = 2;
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    for (const ns of namespaces) {
      tryIp('netns', 'del', ns);
      rmSync(`/etc/netns/${ns}`, { recursive: true, force: true });
    }
    tryIp('link', 'del', bridge);
    process.off('exit', close);
  };
  process.on('exit', close);
  ip('link', 'add', bridge, 'type', 'bridge');
  const k = claimSubnet(bridge);
  ip('link', 'set', bridge, 'up');
  return {
    gateway: `10.213.${k}.1`,
    close,
    host(name) {
      const n = next++;
      const ns = `tsn-${pid}-${name}`;
      const outer = `tsv${pid}x${n}`.slice(0, 15);
      ip('netns', 'add', ns);
      namespaces.push(ns);
      ip('link', 'add', outer, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
      ip('link', 'set', outer, 'master', bridge);
      ip('link', 'set', outer, 'up');
      const address = `10.213.${k}.${n}`;
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0');
      ip('-n', ns, 'link', 'set', 'eth0', 'up');
      return {
        name,
        ns,
        ip: address,
        wrap: [IP, 'netns', 'exec', ns],
        linkDown: () => void ip('link', 'set', outer, 'down'),
        linkUp: () => void ip('link', 'set', outer, 'up'),
        resolveVia(nameserver) {
          mkdirSync(`/etc/netns/${ns}`, { recursive: true });
          writeFileSync(`/etc/netns/${ns}/resolv.conf`, `nameserver ${nameserver}\noptions timeout:1 attempts:2\n`);
        },
      };
    },
  };
}
