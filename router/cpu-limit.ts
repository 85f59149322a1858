// How many cores this process may use, for `--replicas auto`: os.availableParallelism() (the
// CPUs of the process's affinity mask), capped by the container's CPU limit. libuv counts the
// limit in uv_available_parallelism only from 1.49 (uv__get_constrained_cpu in src/unix/linux.c);
// Node 20 ships 1.46, where a pod limited to 2 CPUs on a 64-core node would start 64 routers.
//
// The limit is the cgroup's CPU bandwidth quota, read as libuv 1.49 reads it:
// - cgroup v2: `cpu.max` ("QUOTA PERIOD", or "max PERIOD" for none) in the process's cgroup
//   (`0::PATH` in /proc/self/cgroup) under /sys/fs/cgroup and in every ancestor up to the root:
//   the kernel enforces each level's quota, so the smallest counts
//   (uv__get_cgroupv2_constrained_cpu);
// - cgroup v1: `cpu.cfs_quota_us` (-1 for none) and `cpu.cfs_period_us` in the cpu controller's
//   hierarchy (the `cpu` line of /proc/self/cgroup), mounted at /sys/fs/cgroup/cpu,cpuacct or
//   /sys/fs/cgroup/cpu (uv__get_cgroupv1_constrained_cpu), here also walked up to the mount, as
//   in v2: a container's own cgroup is the mount's root when /proc/self/cgroup names the host's
//   path for it.
// A host with both (v1 controllers beside a v2 `0::` line) is read both ways; the smaller wins.
// Unlike libuv, a fractional quota rounds up: 1.5 CPUs is 2 replicas that share the quota, not
// 1 that leaves half a core idle.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';

/** Cores of CPU time a v2 `cpu.max` grants per period; null: no limit (or unreadable). */
export function parseCpuMax(text: string): number | null {
  const [quota, period] = text.trim().split(/\s+/);
  if (quota === undefined || quota === 'max') return null;
  return ratio(quota, period);
}

/** Cores a v1 quota and period grant; null: no limit (`-1`) or unreadable. */
export function parseCfsQuota(quota: string, period: string): number | null {
  return ratio(quota.trim(), period.trim());
}

function ratio(quota: string, period: string | undefined): number | null {
  const q = Number(quota);
  const p = Number(period);
  if (!/^\d+$/.test(quota) || !Number.isFinite(p) || p <= 0 || q <= 0) return null;
  return q / p;
}

/**
 * The process's cgroup CPU limit in cores (fractional), the smallest quota over its cgroup and
 * its ancestors; null when none is set or none can be read. `root`: where `/proc` and `/sys` are
 * (a test points it at fake files).
 */
export function cgroupCpuLimit(root = '/'): number | null {
  const self = read(join(root, 'proc/self/cgroup'));
  if (self === null) return null;
  let min: number | null = null;
  const take = (cores: number | null) => {
    if (cores !== null && (min === null || cores < min)) min = cores;
  };
  for (const line of self.split('\n')) {
    // hierarchy-ID:controller-list:cgroup-path (the path may itself hold colons).
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, id, controllers, path] = m;
    if (id === '0' && controllers === '') {
      for (const dir of upward(join(root, 'sys/fs/cgroup'), path!)) {
        const max = read(join(dir, 'cpu.max'));
        if (max !== null) take(parseCpuMax(max));
      }
    } else if (controllers!.split(',').includes('cpu')) {
      for (const mount of new Set([`sys/fs/cgroup/${controllers}`, 'sys/fs/cgroup/cpu,cpuacct', 'sys/fs/cgroup/cpu'])) {
        for (const dir of upward(join(root, mount), path!)) {
          const quota = read(join(dir, 'cpu.cfs_quota_us'));
          const period = read(join(dir, 'cpu.cfs_period_us'));
          if (quota !== null && period !== null) take(parseCfsQuota(quota, period));
        }
      }
    }
  }
  return min;
}

/**
 * The replicas `auto` means: one per usable core, at least 1, at most `max`. The cgroup files are
 * read under `BATON_CGROUP_ROOT` when `env` sets it (a test's fake files), else under `/`.
 */
export function autoReplicas(max: number, env: NodeJS.ProcessEnv = process.env): number {
  return replicasFor(max, availableParallelism(), cgroupCpuLimit(env.BATON_CGROUP_ROOT || '/'));
}

/** One replica per core of `cores` and of the CPU limit (rounded up), at least 1, at most `max`. */
export function replicasFor(max: number, cores: number, limit: number | null): number {
  return Math.max(1, Math.min(max, cores, limit === null ? Infinity : Math.ceil(limit)));
}

/** `mount/path`, then each parent directory up to and including `mount`. */
function upward(mount: string, path: string): string[] {
  const parts = path.split('/').filter((p) => p !== '' && p !== '.' && p !== '..');
  const out: string[] = [];
  for (let n = parts.length; n >= 0; n--) out.push(join(mount, ...parts.slice(0, n)));
  return out;
}

function read(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}
