// kubectl is the oracle of the fake API server: the real `kubectl get pods -w` must see exactly the
// events and objects the fake sent, and `kubectl delete pod --grace-period` must reach the
// discovery source as a drain to the pod's deletionTimestamp. If the fake only spoke what Baton
// expects, these would fail.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { FakeApiServer } from '../../sim/k8s/apiserver.ts';
import { clientFromKubeConfig } from '../../router/discovery/k8s-api.ts';
import { K8sPodsSource } from '../../router/discovery/k8s-pods.ts';
import { RecordingSink, until } from './recording-sink.ts';

const KUBECTL = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
const HAVE_KUBECTL = KUBECTL.status === 0;
if (!HAVE_KUBECTL) console.warn('kubectl-oracle: skipped, `kubectl version --client` failed:', KUBECTL.error?.message ?? KUBECTL.stderr);

/** Splits kubectl's stream of pretty-printed JSON documents. */
export function jsonDocuments(text: string): unknown[] {
  const out: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inStr = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inStr) {
      if (c === '\\') i++;
      else if (c === '"') inStr = false;
      continue;
    }
    if (c === '"') inStr = true;
    else if (c === '{') {
      if (depth === 0) start = i;
      depth++;
    } else if (c === '}') {
      depth--;
      if (depth === 0) out.push(JSON.parse(text.slice(start, i + 1)));
    }
  }
  return out;
}

describe.skipIf(!HAVE_KUBECTL)(`the fake API server, seen by kubectl${HAVE_KUBECTL ? '' : ' [SKIPPED: `kubectl version --client` failed; kubectl is the oracle: put kubectl on PATH to run these]'}`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-kubectl-'));
  let fake: FakeApiServer;
  let kc: string;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    fake = await new FakeApiServer({ bookmarkMs: 200 }).start();
    kc = fake.writeKubeconfig(join(dir, 'kubeconfig'));
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await fake.close();
  });

  /** Runs kubectl to its end (asynchronously: the fake answers it from this very process). */
  function kubectl(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const c = spawn('kubectl', args, { env: { ...process.env, KUBECONFIG: kc } });
      children.push(c);
      let stdout = '';
      let stderr = '';
      c.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
      c.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
      c.on('close', (status) => resolve({ status, stdout, stderr }));
    });
  }

  it('`kubectl get pods -w --output-watch-events -o json` sees the events and objects the fake sent, in order', async () => {
    fake.createPod({ name: 'w1', labels: { app: 'sglang' } });
    fake.createPod({ name: 'other', labels: { app: 'nginx' } });
    const child = spawn('kubectl', ['get', 'pods', '-w', '--output-watch-events', '-o', 'json', '-l', 'app=sglang'], { env: { ...process.env, KUBECONFIG: kc } });
    children.push(child);
    let out = '';
    let err = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
    await until(() => fake.watches.some((w) => w.query.includes('app%3Dsglang')), `kubectl's watch (stderr: ${err})`, 20_000);
    const mine = fake.watches.find((w) => w.query.includes('app%3Dsglang'))!;
    fake.createPod({ name: 'w2', labels: { app: 'sglang' }, ready: false });
    fake.setReady('w2', true);
    fake.deletePod('w1', 30);
    fake.evictPod('w2');
    fake.updatePod('other', 'default', (p) => { p.labels.app = 'sglang'; }); // starts matching: ADDED
    fake.updatePod('other', 'default', (p) => { p.labels.app = 'nginx'; }); // stops matching: DELETED
    fake.finalizePod('w1');
    const changes = mine.sent.filter((e) => e.type !== 'BOOKMARK');
    expect(changes.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'MODIFIED', 'MODIFIED', 'ADDED', 'DELETED', 'DELETED']);
    await until(() => jsonDocuments(out).length >= 1 + changes.length, `kubectl to print ${1 + changes.length} events (stderr: ${err})`, 20_000);
    child.kill();
    const seen = jsonDocuments(out) as { type: string; object: Record<string, unknown> }[];
    // The list (w1, as ADDED), then exactly the watch's events: same types, same objects.
    const list = fake.podList().length; // sanity: 'other' was never printed
    expect(list).toBe(2);
    expect(seen[0]).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'w1' } } });
    expect(seen.slice(1)).toEqual(changes);
  }, 60_000);

  it('`kubectl delete pod --grace-period` reaches the pods source as a drain to the deletionTimestamp, then a removal', async () => {
    const kcObj = new KubeConfig();
    kcObj.loadFromFile(kc);
    const sink = new RecordingSink();
    const source = new K8sPodsSource({ client: await clientFromKubeConfig(kcObj), namespace: 'default', selector: ['app=sglang'], port: 8000, relistMs: 60_000, watchdogMs: 5_000 });
    const p = fake.createPod({ name: 'w3', labels: { app: 'sglang' } });
    await source.start(sink);
    try {
      expect(sink.serving().get(p.uid)).toBe(`http://${p.ip}:8000`);
      const del = await kubectl(['delete', 'pod', 'w3', '--grace-period=7', '--wait=false']);
      expect(del.stderr).toBe('');
      expect(del.stdout).toMatch(/pod "w3" deleted/);
      await until(() => sink.draining().has(p.uid), 'the drain');
      expect(sink.draining().get(p.uid)).toBe(fake.pod('w3')!.deletionTimestamp);
      const got = await kubectl(['get', 'pod', 'w3', '-o', 'jsonpath={.metadata.deletionGracePeriodSeconds}']);
      expect(got.stdout).toBe('7');
      fake.finalizePod('w3');
      await until(() => !sink.workers.has(p.uid), 'the removal');
      expect((await kubectl(['get', 'pod', 'w3'])).stderr).toMatch(/pods "w3" not found/);
    } finally {
      await source.stop();
    }
  }, 60_000);
});
