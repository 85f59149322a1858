// What a process costs, read from the kernel rather than asked of the process: the same source for
// a Node proxy and for nginx, and it counts every thread (GC, libuv pool), not only JavaScript.
// Linux only (/proc); elsewhere the figures are reported as unavailable.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

/** Clock ticks per second of /proc/PID/stat's utime and stime (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** utime + stime of one process, µs; null when it is gone or /proc is not there. */
export function cpuMicros(pid: number): number | null {
  try {
    return parseStatCpu(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

/** Fields 14 and 15 of /proc/PID/stat, in µs. The command name (field 2) may hold spaces and parens. */
export function parseStatCpu(stat: string): number {
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); utime is field 14, stime field 15.
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  return ((utime + stime) * 1_000_000) / TICKS_PER_SECOND;
}

/** Resident set size of one process, bytes; null when it is gone. */
export function rssBytes(pid: number): number | null {
  try {
    return parseStatusRss(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return null;
  }
}

export function parseStatusRss(status: string): number | null {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  return m ? Number(m[1]) * 1024 : null;
}

/** Direct children of a process (nginx's workers under its master). */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** A process and its children: one target may be several processes (nginx master + workers). */
export function processTree(pid: number): number[] {
  return [pid, ...childPids(pid)];
}

export function treeCpuMicros(pid: number): number {
  return processTree(pid).reduce((n, p) => n + (cpuMicros(p) ?? 0), 0);
}

export function treeRssBytes(pid: number): number {
  return processTree(pid).reduce((n, p) => n + (rssBytes(p) ?? 0), 0);
}

export const procAvailable = (): boolean => cpuMicros(process.pid) !== null;

export interface Machine {
  cores: number;
  cpu: string;
  memoryGiB: number;
  node: string;
  os: string;
  nginx: string | null;
}

export function describeMachine(nginx: string | null): Machine {
  const cpus = os.cpus();
  return {
    cores: cpus.length,
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    nginx,
  };
}

/**
 * Restrict a process, every thread of it, to the CPUs in `cpus` ("0", "1-3"). False when
 * `taskset` is not there or refuses (not Linux, no permission): the caller runs unpinned.
 */
export function pinProcess(pid: number, cpus: string): boolean {
  try {
    return spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' }).status === 0;
  } catch {
    return false;
  }
}

/** Read and write system calls of every kind a process has made (/proc/PID/io); null when unreadable. */
export function syscalls(pid: number): { reads: number; writes: number } | null {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const r = /^syscr:\s+(\d+)/m.exec(io);
    const w = /^syscw:\s+(\d+)/m.exec(io);
    return r && w ? { reads: Number(r[1]), writes: Number(w[1]) } : null;
  } catch {
    return null;
  }
}
