// docs/kubernetes.md, run: the blocks marked `<!-- tested -->` are executed command for command
// against the fake API server (sim/k8s/apiserver.ts) with the real kubectl, the workers are
// simulated SGLang workers on distinct loopback addresses as the example Deployment's pods, and the
// dashboard step starts the dashboard's host (startApp, as `baton serve` does, without building the
// page) with the settings it read from the ConfigMap. Then a `kubectl delete pod` is seen as a drain.
// Plus the manifests: `kubectl apply --dry-run=client` accepts them, every field is one the
// Kubernetes API types know (@kubernetes/client-node's models, generated from the API's OpenAPI),
// and they agree with the router (its config loads, the RBAC covers what discovery reads, the
// probes are routes the router answers).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import * as k8s from '@kubernetes/client-node';
import { FakeApiServer, type PodModel } from '../../sim/k8s/apiserver.ts';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { startApp, type AppHandle } from '../../host/app.ts';
import { routerSettings } from '../../cli/serve.ts';
import { loadConfig } from '../../router/config.ts';
import { until } from './recording-sink.ts';

const ROOT = resolve(__dirname, '../..');
const HAVE_KUBECTL = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
if (!HAVE_KUBECTL) console.warn('docs-walkthrough: skipped, `kubectl version --client` failed');

/** The `<!-- tested -->` sh blocks of a markdown file, as lists of commands. */
export function testedBlocks(md: string): string[][] {
  const out: string[][] = [];
  const re = /<!-- tested -->\s*\n```sh\n([\s\S]*?)```/g;
  for (let m = re.exec(md); m; m = re.exec(md)) out.push(m[1]!.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')));
  return out;
}

function manifests(dir: string): Record<string, unknown>[] {
  return readdirSync(dir).filter((f) => f.endsWith('.yaml')).flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((d) => d.toJSON() as Record<string, unknown>)).filter(Boolean);
}

/** Unknown fields and wrong scalar types, against the API types of @kubernetes/client-node. */
export function fieldErrors(value: unknown, type: string, path: string): string[] {
  if (value === null || value === undefined) return [];
  const arr = /^Array<(.+)>$/.exec(type);
  if (arr) return Array.isArray(value) ? value.flatMap((v, i) => fieldErrors(v, arr[1]!, `${path}[${i}]`)) : [`${path}: expected a list`];
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) return typeof value === 'object' && !Array.isArray(value) ? Object.entries(value as object).flatMap(([k, v]) => fieldErrors(v, map[1]!, `${path}.${k}`)) : [`${path}: expected a mapping`];
  if (type === 'string' || type === 'Date') return typeof value === 'string' ? [] : [`${path}: expected a string, got ${JSON.stringify(value)}`];
  if (type === 'number') return typeof value === 'number' ? [] : [`${path}: expected a number, got ${JSON.stringify(value)}`];
  if (type === 'boolean') return typeof value === 'boolean' ? [] : [`${path}: expected a boolean`];
  if (type === 'IntOrString') return typeof value === 'number' || typeof value === 'string' ? [] : [`${path}: expected an int or a string`];
  if (type === 'any' || type === 'object') return [];
  const cls = (k8s as unknown as Record<string, { getAttributeTypeMap?: () => { baseName: string; type: string }[] }>)[type];
  if (!cls?.getAttributeTypeMap) return [`${path}: no API type ${type}`];
  if (typeof value !== 'object' || Array.isArray(value)) return [`${path}: expected an object (${type})`];
  const attrs = new Map(cls.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  return Object.entries(value as object).flatMap(([k, v]) => (attrs.has(k) ? fieldErrors(v, attrs.get(k)!, `${path}.${k}`) : [`${path}.${k}: unknown field (${type})`]));
}

describe('deploy/kubernetes manifests', () => {
  const objs = [...manifests(join(ROOT, 'deploy/kubernetes')), ...manifests(join(ROOT, 'deploy/kubernetes/workers'))];
  const kinds = objs.map((o) => o.kind);

  it('are a ServiceAccount, a Role and its RoleBinding, a ConfigMap, a Deployment and a Service (plus the example workers)', () => {
    expect(kinds.sort()).toEqual(['ConfigMap', 'Deployment', 'Deployment', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']);
  });

  it('use only fields the Kubernetes API types have', () => {
    const errors = objs.flatMap((o) => fieldErrors(o, `V1${o.kind as string}`, `${o.kind as string}/${(o.metadata as { name: string }).name}`));
    expect(errors).toEqual([]);
    // The check itself catches a typo'd field.
    expect(fieldErrors({ spec: { replica: 1 } }, 'V1Deployment', 'd')).toEqual(['d.spec.replica: unknown field (V1DeploymentSpec)']);
  });

  it('agree with the router: its config loads, the Role grants what discovery reads, the probes are the router\'s routes', () => {
    const cm = objs.find((o) => o.kind === 'ConfigMap') as { data: Record<string, string> };
    const dir = mkdtempSync(join(tmpdir(), 'baton-cm-'));
    const file = join(dir, 'router.yaml');
    writeFileSync(file, cm.data['router.yaml']!);
    const cfg = loadConfig({ file, env: { BATON_SERVICE_DISCOVERY_NAMESPACE: 'baton', BATON_ADMIN_TOKEN: 't' } });
    expect(cfg).toMatchObject({ serviceDiscovery: true, selector: ['app=sglang-worker'], serviceDiscoveryPort: 30000, serviceDiscoveryNamespace: 'baton', host: '0.0.0.0' });
    const role = objs.find((o) => o.kind === 'Role') as { rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[] };
    for (const [group, resource] of [['', 'pods'], ['discovery.k8s.io', 'endpointslices']] as const) {
      const rule = role.rules.find((r) => r.apiGroups.includes(group) && r.resources.includes(resource));
      expect(rule?.verbs.sort()).toEqual(['get', 'list', 'watch']);
    }
    type Probe = { httpGet: { path: string }; periodSeconds?: number; timeoutSeconds?: number; failureThreshold?: number };
    const dep = objs.find((o) => o.kind === 'Deployment' && (o.metadata as { name: string }).name === 'baton') as { spec: { template: { spec: { terminationGracePeriodSeconds: number; containers: { livenessProbe: Probe; readinessProbe: Probe }[] } } } };
    const c = dep.spec.template.spec.containers[0]!;
    expect([c.livenessProbe.httpGet.path, c.readinessProbe.httpGet.path]).toEqual(['/livez', '/readyz']);
    // One slow probe answer (a GC pause, a loaded node) does not take a router pod out of the
    // Service: readiness fails after 3 misses in a row (Kubernetes' default), each given 2 s.
    expect(c.readinessProbe.failureThreshold ?? 3).toBeGreaterThanOrEqual(3);
    expect(c.readinessProbe.timeoutSeconds ?? 1).toBeGreaterThanOrEqual(2);
    // The router's own shutdown fits in the pod's grace.
    expect(cfg.shutdownGraceMs).toBeLessThan(dep.spec.template.spec.terminationGracePeriodSeconds * 1000);
    // The example workers' preStop sleep lasts until Baton has moved their streams.
    const w = objs.find((o) => (o.metadata as { name: string }).name === 'sglang-worker') as { spec: { template: { spec: { terminationGracePeriodSeconds: number; containers: { lifecycle: { preStop: { exec: { command: string[] } } } }[] } } } };
    const sleep = Number(w.spec.template.spec.containers[0]!.lifecycle.preStop.exec.command[1]);
    expect(sleep * 1000).toBeGreaterThanOrEqual(w.spec.template.spec.terminationGracePeriodSeconds * 1000 - cfg.drainMarginMs);
    expect(sleep).toBeLessThan(w.spec.template.spec.terminationGracePeriodSeconds);
  });
});

describe('deploy/kubernetes: what migrates', () => {
  type Container = { args?: string[]; command?: string[]; env?: { name: string; value?: string }[]; volumeMounts?: { name: string; mountPath: string }[] };
  type Dep = { metadata: { name: string }; spec: { template: { spec: { initContainers?: Container[]; containers: Container[]; volumes?: { name: string; emptyDir?: object }[] } } } };
  const router = manifests(join(ROOT, 'deploy/kubernetes')).find((o) => o.kind === 'Deployment') as Dep;
  const worker = manifests(join(ROOT, 'deploy/kubernetes/workers')).find((o) => o.kind === 'Deployment') as Dep;
  const workerArgs = worker.spec.template.spec.containers[0]!.args ?? [];

  it('the example workers run token-only (--skip-tokenizer-init): input_ids in, output_ids out, so a stream can continue on another worker', () => {
    expect(workerArgs).toContain('--skip-tokenizer-init');
  });

  it('the router has the same model\'s tokenizer (text prompts and the OpenAI API), fetched into the volume it reads', () => {
    const spec = router.spec.template.spec;
    const c = spec.containers[0]!;
    const dir = c.env?.find((e) => e.name === 'BATON_TOKENIZERS')?.value;
    expect(dir).toBe('/models/tokenizer');
    const mount = c.volumeMounts?.find((m) => m.mountPath === dir);
    expect(mount).toBeDefined();
    expect(spec.volumes?.find((v) => v.name === mount!.name)?.emptyDir).toBeDefined();
    const init = spec.initContainers?.find((x) => x.volumeMounts?.some((m) => m.name === mount!.name && m.mountPath === dir));
    expect(init).toBeDefined();
    // The workers' model, and the files the tokenizer loads (router/tokenizer/load.ts).
    const model = workerArgs[workerArgs.indexOf('--model-path') + 1];
    expect(init!.env?.find((e) => e.name === 'MODEL')?.value).toBe(model);
    expect(init!.args!.join(' ')).toMatch(/tokenizer\.json tokenizer_config\.json generation_config\.json/);
    // The router's config takes it.
    const cm = manifests(join(ROOT, 'deploy/kubernetes')).find((o) => o.kind === 'ConfigMap') as { data: Record<string, string> };
    const tmp = mkdtempSync(join(tmpdir(), 'baton-cm-tok-'));
    writeFileSync(join(tmp, 'router.yaml'), cm.data['router.yaml']!);
    expect(loadConfig({ file: join(tmp, 'router.yaml'), env: { BATON_SERVICE_DISCOVERY_NAMESPACE: 'baton', BATON_ADMIN_TOKEN: 't', BATON_TOKENIZERS: dir! } }).tokenizers).toEqual([dir]);
  });
});

describe('deploy/kubernetes: router replicas', () => {
  const objs = manifests(join(ROOT, 'deploy/kubernetes'));
  type Dep = { spec: { replicas: number; selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: { containers: { ports: { name: string; containerPort: number }[] }[] } } } };
  const dep = objs.find((o) => o.kind === 'Deployment' && (o.metadata as { name: string }).name === 'baton') as Dep;
  const svc = objs.find((o) => o.kind === 'Service') as { metadata: { annotations?: Record<string, string> }; spec: { selector: Record<string, string> } };

  it('run several router pods, labelled for the hub, each scraped on its own port, the Service never', () => {
    expect(dep.spec.replicas).toBeGreaterThanOrEqual(2);
    const t = dep.spec.template;
    expect(t.metadata.labels['baton.dev/role']).toBe('router');
    const port = t.spec.containers[0]!.ports.find((p) => p.name === 'http')!.containerPort;
    expect(t.metadata.annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(port), 'prometheus.io/path': '/metrics' });
    expect(svc.metadata.annotations?.['prometheus.io/scrape']).toBeUndefined();
    // The Service selects the same pods the Deployment runs.
    for (const [k, v] of Object.entries(svc.spec.selector)) expect(t.metadata.labels[k]).toBe(v);
  });

  it('the PodMonitor selects the router pods and their named port', () => {
    const [pm] = manifests(join(ROOT, 'deploy/kubernetes/monitoring')) as { kind: string; spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string; path: string }[] } }[];
    expect(pm!.kind).toBe('PodMonitor');
    for (const [k, v] of Object.entries(pm!.spec.selector.matchLabels)) expect(dep.spec.template.metadata.labels[k]).toBe(v);
    expect(pm!.spec.podMetricsEndpoints).toEqual([expect.objectContaining({ port: 'http', path: '/metrics' })]);
    expect(dep.spec.template.spec.containers[0]!.ports.map((p) => p.name)).toContain('http');
  });
});

describe.skipIf(!HAVE_KUBECTL)(`docs/kubernetes.md, run against the fake API server${HAVE_KUBECTL ? '' : ' [SKIPPED: `kubectl version --client` failed; kubectl is the oracle: put kubectl on PATH to run these]'}`, () => {
  let fake: FakeApiServer;
  let kc: string;
  let cwd: string;
  const clusters: SimCluster[] = [];
  let app: AppHandle | null = null;
  beforeAll(async () => {
    fake = await new FakeApiServer({ bookmarkMs: 1000 }).start();
    cwd = mkdtempSync(join(tmpdir(), 'baton-walk-'));
    kc = fake.writeKubeconfig(join(cwd, 'kubeconfig'));
    symlinkSync(join(ROOT, 'deploy'), join(cwd, 'deploy'));
  });
  afterAll(async () => {
    await app?.close();
    await Promise.all(clusters.map((c) => c.stop()));
    await fake.close();
  });

  function sh(line: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const c = spawn('bash', ['-c', line], { cwd, env: { ...process.env, KUBECONFIG: kc } });
      let stdout = '';
      let stderr = '';
      c.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
      c.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
      c.on('close', (status) => resolve({ status, stdout, stderr }));
    });
  }

  it('`kubectl apply --dry-run=client` accepts every manifest', async () => {
    const r = await sh('kubectl apply --dry-run=client --validate=false -f deploy/kubernetes/ -f deploy/kubernetes/workers/');
    expect(r.stderr).toBe('');
    expect(r.stdout.trim().split('\n').sort()).toEqual(['configmap/baton-config created (dry run)', 'deployment.apps/baton created (dry run)', 'deployment.apps/sglang-worker created (dry run)', 'role.rbac.authorization.k8s.io/baton-discovery created (dry run)', 'rolebinding.rbac.authorization.k8s.io/baton-discovery created (dry run)', 'service/baton created (dry run)', 'serviceaccount/baton created (dry run)']);
  });

  it('walks from an empty namespace to a dashboard watching the workers, and a delete shows as a drain', async () => {
    const blocks = testedBlocks(readFileSync(join(ROOT, 'docs/kubernetes.md'), 'utf8'));
    expect(blocks.map((b) => b.length)).toEqual([3, 2, 2]);
    // 1. namespace, secret, manifests. The fake serves no OpenAPI document, so kubectl's
    //    client-side schema check is off here; the fields are checked above against the API types.
    for (const line of blocks[0]!) {
      const r = await sh(line.replace(/^kubectl apply /, 'kubectl apply --validate=false '));
      expect(r.stderr, line).toBe('');
      expect(r.status, line).toBe(0);
    }
    // 2. The example worker Deployment, and its pods as the cluster would run them.
    const [applyWorkers, getPods] = blocks[1]!;
    expect((await sh(applyWorkers!.replace(/^kubectl apply /, 'kubectl apply --validate=false '))).status).toBe(0);
    const dep = manifests(join(ROOT, 'deploy/kubernetes/workers'))[0] as { spec: { replicas: number; template: { metadata: { labels: Record<string, string>; annotations: Record<string, string> }; spec: { terminationGracePeriodSeconds: number; containers: { ports: { containerPort: number }[] }[] } } } };
    const tpl = dep.spec.template;
    const port = tpl.spec.containers[0]!.ports[0]!.containerPort;
    const pods: PodModel[] = [];
    for (let i = 0; i < dep.spec.replicas; i++) {
      const ip = `127.0.77.${i + 1}`;
      clusters.push(await startCluster({ workers: 1, host: ip, port, tokenIntervalMs: 5 }));
      pods.push(fake.createPod({ name: `sglang-worker-7d9f-${i}`, namespace: 'baton', labels: tpl.metadata.labels, annotations: tpl.metadata.annotations, ip, port, terminationGracePeriodSeconds: tpl.spec.terminationGracePeriodSeconds }));
    }
    const got = await sh(getPods!);
    expect(got.status).toBe(0);
    for (const p of pods) expect(got.stdout).toContain(p.name);
    // 3. The dashboard, with the ConfigMap's settings.
    const [getConfig, serve] = blocks[2]!;
    expect((await sh(getConfig!)).status).toBe(0);
    expect(readFileSync(join(cwd, 'router.yaml'), 'utf8')).toBe((manifests(join(ROOT, 'deploy/kubernetes')).find((o) => o.kind === 'ConfigMap') as { data: Record<string, string> }).data['router.yaml']);
    const m = /^BATON_SERVICE_DISCOVERY_NAMESPACE=(\S+) npx baton serve --config (\S+) --sim 0$/.exec(serve!);
    expect(m, serve).not.toBeNull();
    const prev = { ns: process.env.BATON_SERVICE_DISCOVERY_NAMESPACE, kc: process.env.KUBECONFIG };
    process.env.BATON_SERVICE_DISCOVERY_NAMESPACE = m![1];
    process.env.KUBECONFIG = kc;
    try {
      app = await startApp({ sim: 0, port: 0, staticRoot: null, router: routerSettings(join(cwd, m![2]!)) });
    } finally {
      if (prev.ns === undefined) delete process.env.BATON_SERVICE_DISCOVERY_NAMESPACE; else process.env.BATON_SERVICE_DISCOVERY_NAMESPACE = prev.ns;
      if (prev.kc === undefined) delete process.env.KUBECONFIG; else process.env.KUBECONFIG = prev.kc;
    }
    type Row = { url: string; health: string; drain_deadline?: number; discovery?: { pod?: string; namespace?: string; node?: string } };
    const rows = async () => ((await (await fetch(`${app!.router.url}/workers`)).json()) as { workers: Row[]; discovery: { source: string; state: string }[] });
    await until(() => app!.router.workers().length === pods.length, 'the dashboard\'s router to discover every pod', 20_000);
    const seen = await rows();
    expect(seen.workers.map((w) => [w.url, w.discovery?.pod, w.discovery?.namespace]).sort()).toEqual(pods.map((p) => [`http://${p.ip}:${port}`, p.name, 'baton']).sort());
    expect(seen.discovery).toEqual([expect.objectContaining({ source: 'k8s-pods', state: 'synced' })]);
    // A delete (as a rolling update does it) is a drain to the pod's deletionTimestamp.
    const del = await sh(`kubectl -n baton delete pod ${pods[0]!.name} --wait=false`);
    expect(del.status).toBe(0);
    let row: Row | undefined;
    for (let i = 0; i < 200 && row?.health !== 'draining'; i++) {
      row = (await rows()).workers.find((w) => w.discovery?.pod === pods[0]!.name);
      if (row?.health !== 'draining') await new Promise((r) => setTimeout(r, 50));
    }
    expect(row?.health).toBe('draining');
    expect(row!.drain_deadline).toBe(fake.pod(pods[0]!.name, 'baton')!.deletionTimestamp);
  }, 120_000);
});
