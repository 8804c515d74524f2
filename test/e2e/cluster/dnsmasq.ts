// E2E support: a real DNS server (Debian's dnsmasq) inside a namespace host, serving the A
// records of one hosts file that the test rewrites at run time (SIGHUP makes dnsmasq re-read
// it). Names under tessera.test only; a name with no record answers NXDOMAIN.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Host } from '../support/netns.js';

export interface Dns {
  readonly ip: string;
  /** Replaces every record: name -> its addresses (one A record each), then SIGHUP. */
  set(records: Readonly<Record<string, readonly string[]>>): Promise<void>;
  stop(): Promise<void>;
}

export async function startDnsmasq(host: Host, dir: string): Promise<Dns> {
  const file = join(dir, 'cluster.hosts');
  writeFileSync(file, '');
  const args = [
    ...host.wrap.slice(1),
    'dnsmasq',
    '--keep-in-foreground',
    '--conf-file=/dev/null',
    '--no-resolv',
    '--no-hosts',
    '--no-negcache',
    `--addn-hosts=${file}`,
    '--local=/tessera.test/',
    `--listen-address=${host.ip}`,
    '--bind-interfaces',
    '--port=53',
    '--user=root',
    '--pid-file=',
    '--log-facility=-',
  ];
  const child: ChildProcess = spawn(host.wrap[0] as string, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dnsmasq did not start\n${stderr}`)), 10_000);
    const check = (): void => {
      if (/started, version/.test(stderr)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stderr?.on('data', check);
    void exited.then(() => reject(new Error(`dnsmasq exited\n${stderr}`)));
  });
  return {
    ip: host.ip,
    async set(records) {
      const lines = Object.entries(records).flatMap(([name, ips]) => ips.map((ip) => `${ip} ${name}`));
      writeFileSync(file, `${lines.join('\n')}\n`);
      child.kill('SIGHUP');
      await new Promise((resolve) => setTimeout(resolve, 50));
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
