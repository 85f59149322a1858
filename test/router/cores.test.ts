// `--replicas auto` under a container CPU limit (router/cpu-limit.ts): the cgroup's quota,
// read as libuv 1.49 reads it (v2 cpu.max up the hierarchy, v1 cpu.cfs_quota_us / period), from
// fake cgroup files under a temporary root; and `baton router --replicas auto` resolving its
// count from them.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cgroupCpuLimit, parseCfsQuota, parseCpuMax, replicasFor } from '../../router/cpu-limit.ts';
import { loadConfig } from '../../router/config.ts';
import { configFromArgv } from '../../cli/router.ts';
import { spawnRouter, type RouterProc } from './harness/procs.ts';

const roots: string[] = [];
/** A fake `/` holding the given files (path → content). */
function fakeRoot(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'baton-cgroup-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

describe('parsing', () => {
  it('cpu.max: QUOTA PERIOD in cores, "max" for none, nonsense for none', () => {
    expect(parseCpuMax('200000 100000\n')).toBe(2);
    expect(parseCpuMax('150000 100000')).toBe(1.5);
    expect(parseCpuMax('50000 100000')).toBe(0.5);
    expect(parseCpuMax('max 100000\n')).toBeNull();
    expect(parseCpuMax('')).toBeNull();
    expect(parseCpuMax('200000 0')).toBeNull();
    expect(parseCpuMax('lots 100000')).toBeNull();
  });

  it('cfs_quota_us / cfs_period_us in cores, -1 for none', () => {
    expect(parseCfsQuota('400000\n', '100000\n')).toBe(4);
    expect(parseCfsQuota('-1\n', '100000\n')).toBeNull();
    expect(parseCfsQuota('100000', '0')).toBeNull();
  });

  it('auto: min(cores, ceil(limit)), at least 1, at most the bound', () => {
    expect(replicasFor(64, 64, 2)).toBe(2);
    expect(replicasFor(64, 64, 1.5)).toBe(2);
    expect(replicasFor(64, 64, 0.25)).toBe(1);
    expect(replicasFor(64, 4, 16)).toBe(4);
    expect(replicasFor(64, 96, null)).toBe(64);
    expect(replicasFor(64, 8, null)).toBe(8);
  });
});

describe('the cgroup CPU limit from the files', () => {
  it('cgroup v2 in its own namespace (a pod): /sys/fs/cgroup/cpu.max', () => {
    expect(cgroupCpuLimit(fakeRoot({ 'proc/self/cgroup': '0::/\n', 'sys/fs/cgroup/cpu.max': '200000 100000\n' }))).toBe(2);
    expect(cgroupCpuLimit(fakeRoot({ 'proc/self/cgroup': '0::/\n', 'sys/fs/cgroup/cpu.max': 'max 100000\n' }))).toBeNull();
  });

  it('cgroup v2 with a path: the smallest quota of the cgroup and its ancestors', () => {
    const self = '0::/kubepods.slice/pod1.slice/cri-abc.scope\n';
    const root = fakeRoot({
      'proc/self/cgroup': self,
      'sys/fs/cgroup/kubepods.slice/cpu.max': 'max 100000\n',
      'sys/fs/cgroup/kubepods.slice/pod1.slice/cpu.max': '300000 100000\n',
      'sys/fs/cgroup/kubepods.slice/pod1.slice/cri-abc.scope/cpu.max': 'max 100000\n',
    });
    expect(cgroupCpuLimit(root)).toBe(3);
    const tighter = fakeRoot({
      'proc/self/cgroup': self,
      'sys/fs/cgroup/kubepods.slice/cpu.max': '100000 100000\n',
      'sys/fs/cgroup/kubepods.slice/pod1.slice/cri-abc.scope/cpu.max': '400000 100000\n',
    });
    expect(cgroupCpuLimit(tighter)).toBe(1);
  });

  it('cgroup v1: the cpu controller\'s quota, at cpu,cpuacct or cpu, in the cgroup or at the mount', () => {
    expect(cgroupCpuLimit(fakeRoot({
      'proc/self/cgroup': '12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n',
      'sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us': '250000\n',
      'sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us': '100000\n',
    }))).toBe(2.5);
    // A container whose /proc/self/cgroup names the host's path, with its own cgroup mounted as the root.
    expect(cgroupCpuLimit(fakeRoot({
      'proc/self/cgroup': '3:cpu:/kubepods/burstable/pod1/abc\n',
      'sys/fs/cgroup/cpu/cpu.cfs_quota_us': '200000\n',
      'sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n',
    }))).toBe(2);
    expect(cgroupCpuLimit(fakeRoot({
      'proc/self/cgroup': '1:cpu:/\n',
      'sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1\n',
      'sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n',
    }))).toBeNull();
  });

  it('both hierarchies (v1 controllers beside a 0:: line): the smaller quota', () => {
    expect(cgroupCpuLimit(fakeRoot({
      'proc/self/cgroup': '2:cpu,cpuacct:/\n0::/\n',
      'sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '300000\n',
      'sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000\n',
      'sys/fs/cgroup/cpu.max': '200000 100000\n',
    }))).toBe(2);
  });

  it('no limit when nothing can be read', () => {
    expect(cgroupCpuLimit(fakeRoot({}))).toBeNull();
    expect(cgroupCpuLimit(fakeRoot({ 'proc/self/cgroup': '0::/\n' }))).toBeNull();
    expect(cgroupCpuLimit(fakeRoot({ 'proc/self/cgroup': 'garbage\n' }))).toBeNull();
  });
});

describe('--replicas auto', () => {
  const limited = (cpus: string) => fakeRoot({ 'proc/self/cgroup': '0::/\n', 'sys/fs/cgroup/cpu.max': `${cpus} 100000\n` });

  it('is the cgroup limit, rounded up, from a flag, the environment or the file', () => {
    const cores = Math.min(64, availableParallelism());
    const root = limited('100000');
    expect(loadConfig({ flags: { replicas: 'auto' }, env: { BATON_CGROUP_ROOT: root } }).replicas).toBe(1);
    expect(loadConfig({ env: { BATON_CGROUP_ROOT: root, BATON_REPLICAS: 'auto' } }).replicas).toBe(1);
    const file = join(root, 'r.yaml');
    writeFileSync(file, 'replicas: auto\n');
    expect(loadConfig({ file, env: { BATON_CGROUP_ROOT: root } }).replicas).toBe(1);
    expect(configFromArgv(['--replicas', 'auto'], { BATON_CGROUP_ROOT: limited('150000') })!.replicas).toBe(Math.min(2, cores));
    // No limit: one per core.
    expect(configFromArgv(['--replicas', 'auto'], { BATON_CGROUP_ROOT: fakeRoot({ 'proc/self/cgroup': '0::/\n', 'sys/fs/cgroup/cpu.max': 'max 100000\n' }) })!.replicas).toBe(cores);
  });

  // With one core the limit of 1 below is the machine's count too: nothing to tell apart.
  it.skipIf(availableParallelism() < 2)('baton router --replicas auto under a 1-CPU limit is one router, not one per core (skipped on a 1-core machine: a 1-CPU limit changes nothing there)', async () => {
    let router: RouterProc | null = null;
    const prior = process.env.BATON_CGROUP_ROOT;
    process.env.BATON_CGROUP_ROOT = limited('100000');
    try {
      router = await spawnRouter(['--replicas', 'auto', '--worker', 'http://127.0.0.1:9'], 100_000);
    } finally {
      if (prior === undefined) delete process.env.BATON_CGROUP_ROOT;
      else process.env.BATON_CGROUP_ROOT = prior;
    }
    try {
      const line = router.output.find((l) => l.includes('listening on'))!;
      expect(line, router.output.join('')).not.toMatch(/replicas by/);
      const res = await fetch(`${router.url}/replicas`);
      expect(((await res.json()) as { replicas: unknown[] }).replicas).toHaveLength(1);
    } finally {
      await router.stop();
    }
  }, 120_000);
});
