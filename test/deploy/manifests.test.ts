// The Kubernetes manifests (deploy/, kustomize) and the Dockerfile, checked offline against the
// CLI they run: rendered by `kubectl kustomize` where kubectl is installed (and always parsed
// from the files kustomization.yaml lists, with the pinned `yaml` package), every object
// validated as a Kubernetes object (kubernetes-models' schemas), then the wiring: every flag in
// a container's args is an option of that tessera command, container ports are the --port and
// --data-port values, Services select the pods and target named ports, the worker Services are
// headless and the router's --prefill-dns/--decode-dns name them with their HTTP port, probes
// hit /health on the HTTP port, the cluster secret comes from one Secret key into the variable
// the CLI reads, and each worker's memory limit holds its pool as `tessera plan` computes it.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Service } from 'kubernetes-models/v1/Service';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse } from 'yaml';
import { COMMANDS } from '../../src/cli/commands/index.js';
import { ROOT, runCli, testHome } from '../e2e/support/process.js';

type Obj = {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec: Record<string, unknown>;
} & Record<string, unknown>;
interface Container {
  name: string;
  args: string[];
  env: {
    name: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } };
  }[];
  ports: { name: string; containerPort: number }[];
  readinessProbe: { httpGet?: { path: string; port: string } };
  livenessProbe: { httpGet?: { path: string; port: string } };
  resources: { requests: Record<string, string>; limits: Record<string, string> };
}

const DEPLOY = join(ROOT, 'deploy');
const kustomization = parse(readFileSync(join(DEPLOY, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
const fromFiles: Obj[] = kustomization.resources.flatMap((file) =>
  parseAllDocuments(readFileSync(join(DEPLOY, file), 'utf8')).map((d) => d.toJS() as Obj),
);
const kubectl = (() => {
  try {
    return execFileSync('kubectl', ['kustomize', DEPLOY], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch {
    return undefined;
  }
})();
if (kubectl === undefined)
  console.warn(
    'test/deploy: kubectl is not installed; checking the manifests as parsed from the files (no kustomize render)',
  );
const objects: Obj[] = kubectl === undefined ? fromFiles : parseAllDocuments(kubectl).map((d) => d.toJS() as Obj);

const byName = (kind: string, name: string): Obj => {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (o === undefined) throw new Error(`no ${kind} ${name} in deploy/`);
  return o;
};
const containerOf = (d: Obj): Container =>
  (d.spec['template'] as { spec: { containers: Container[] } }).spec.containers[0] as Container;
const flagValue = (args: readonly string[], flag: string): string | undefined => {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
};
const program = new Command('tessera');
for (const register of COMMANDS) register(program);
const optionsOf = (command: string): Set<string> =>
  new Set(program.commands.find((c) => c.name() === command)?.options.map((o) => o.long as string) ?? []);
const mebibytes = (q: string): number => Number(/^(\d+)Mi$/.exec(q)?.[1] ?? Number.NaN) * 1024 * 1024;

describe('deploy/: Kubernetes manifests (kustomize)', () => {
  it('renders the same objects kustomize would, each a valid Kubernetes object', () => {
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(
      fromFiles.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
    );
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'Deployment/tessera-decode',
      'Deployment/tessera-prefill',
      'Deployment/tessera-router',
      'Service/tessera',
      'Service/tessera-decode',
      'Service/tessera-prefill',
    ]);
    for (const o of objects) {
      const model = o.kind === 'Deployment' ? new Deployment(o as never) : new Service(o as never);
      expect(() => model.validate()).not.toThrow();
    }
    // and the validation can fail: a port that is not a number
    const broken = structuredClone(byName('Service', 'tessera')) as Obj;
    (broken.spec['ports'] as { port: unknown }[])[0] = { port: 'eight thousand' };
    expect(() => new Service(broken as never).validate()).toThrow();
  });

  for (const [name, command, role] of [
    ['tessera-router', 'router', undefined],
    ['tessera-prefill', 'serve', 'prefill'],
    ['tessera-decode', 'serve', 'decode'],
  ] as const) {
    it(`${name}: its args are ${command}'s flags; ports, probes, secret and Service agree with them`, () => {
      const d = byName('Deployment', name);
      const c = containerOf(d);
      expect(c.args[0]).toBe(command);
      const known = optionsOf(command);
      for (const a of c.args.filter((x) => x.startsWith('--')))
        expect(known, `${a} is not a tessera ${command} option`).toContain(a);
      if (role !== undefined) expect(flagValue(c.args, '--role')).toBe(role);
      expect(flagValue(c.args, '--host')).toBe('0.0.0.0');
      const http = c.ports.find((p) => p.name === 'http');
      expect(String(http?.containerPort)).toBe(flagValue(c.args, '--port'));
      if (role !== undefined) {
        expect(String(c.ports.find((p) => p.name === 'data')?.containerPort)).toBe(flagValue(c.args, '--data-port'));
        // the cluster address it advertises is the pod's own IP
        expect(flagValue(c.args, '--data-host')).toBe('$(POD_IP)');
        expect(c.env.find((e) => e.name === 'POD_IP')?.valueFrom?.fieldRef?.fieldPath).toBe('status.podIP');
        expect(c.livenessProbe.httpGet).toEqual({ path: '/health', port: 'http' });
      } else {
        // not plain /health (503 while no worker is up): a router with no worker up is alive, only not ready
        expect(c.livenessProbe.httpGet).toEqual({ path: '/health?probe=live', port: 'http' });
      }
      expect(c.readinessProbe.httpGet).toEqual({ path: '/health', port: 'http' });
      expect(c.env.find((e) => e.name === 'TESSERA_CLUSTER_SECRET')?.valueFrom?.secretKeyRef).toEqual({
        name: 'tessera-cluster',
        key: 'secret',
      });
      const labels = (d.spec['template'] as { metadata: { labels: Record<string, string> } }).metadata.labels;
      expect((d.spec['selector'] as { matchLabels: Record<string, string> }).matchLabels).toEqual(
        expect.objectContaining({ 'app.kubernetes.io/component': command === 'router' ? 'router' : role }),
      );
      const svc = byName('Service', command === 'router' ? 'tessera' : name);
      for (const [k, v] of Object.entries(svc.spec['selector'] as Record<string, string>)) expect(labels[k]).toBe(v);
      for (const p of svc.spec['ports'] as { targetPort: string }[])
        expect(c.ports.map((x) => x.name)).toContain(p.targetPort);
      expect(svc.spec['clusterIP']).toBe(command === 'router' ? undefined : 'None');
    });
  }

  it('the router names the worker Services by DNS, on their HTTP port', () => {
    const args = containerOf(byName('Deployment', 'tessera-router')).args;
    for (const role of ['prefill', 'decode'] as const) {
      const value = flagValue(args, `--${role}-dns`) as string;
      const [host, port] = value.split(':');
      expect(host).toBe(`tessera-${role}.$(POD_NAMESPACE).svc.cluster.local`);
      const svc = byName('Service', `tessera-${role}`);
      expect(String((svc.spec['ports'] as { name: string; port: number }[]).find((p) => p.name === 'http')?.port)).toBe(
        port,
      );
    }
    expect(
      containerOf(byName('Deployment', 'tessera-router')).env.find((e) => e.name === 'POD_NAMESPACE')?.valueFrom
        ?.fieldRef?.fieldPath,
    ).toBe('metadata.namespace');
  });

  it("each worker's memory limit holds its KV pool as `tessera plan` computes it, and the pool fits the context", async () => {
    const home = await testHome();
    try {
      for (const name of ['tessera-prefill', 'tessera-decode']) {
        const c = containerOf(byName('Deployment', name));
        const plan = await runCli(
          [
            'plan',
            '--model',
            flagValue(c.args, '--model') as string,
            '--context-length',
            flagValue(c.args, '--context-length') as string,
            '--kv-pages',
            flagValue(c.args, '--kv-pages') as string,
          ],
          home.dir,
        );
        expect(plan.code).toBe(0);
        expect(plan.stdout).toMatch(/fits\s+yes/);
        const poolBytes = Number(
          (/pool\s+[\d,]+ pages = [\d,]+ tokens = ([\d,]+) B/.exec(plan.stdout)?.[1] ?? 'NaN').replaceAll(',', ''),
        );
        expect(poolBytes).toBeGreaterThan(0);
        expect(mebibytes(c.resources.limits['memory'] as string)).toBeGreaterThan(poolBytes + 256 * 1024 * 1024);
        expect(mebibytes(c.resources.requests['memory'] as string)).toBeGreaterThan(poolBytes + 100 * 1024 * 1024);
      }
    } finally {
      await home.remove();
    }
  });
});

describe('Dockerfile', () => {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const stages = text.split(/^FROM /m).slice(1);
  const final = stages[stages.length - 1] as string;
  it('is Debian-based, runs as a non-root user, and its final stage has no build tools', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(final.split('\n')[0]).toMatch(/^node:20-bookworm-slim/);
    expect(final).toMatch(/^USER node$/m);
    expect(final).not.toMatch(/apt-get|build-essential|gcc|g\+\+|make|python3|npm (ci|install)/);
    expect(final).toMatch(/ENTRYPOINT \["node", "\/app\/bin\/tessera\.js"\]/);
    for (const path of ['bin', 'dist', 'build', 'models', 'node_modules'])
      expect(final).toContain(`/app/${path} ./${path}`);
    expect(stages[0]).toMatch(/npm ci && npm prune --omit=dev/);
  });
});
