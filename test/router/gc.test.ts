// router/gc.ts: the router's process scavenges on its main thread only, unless told otherwise.
// Checked on V8's own account of each scavenge (--trace-gc-nvp prints the time helper threads
// spent on it), in child processes that keep enough alive for V8 to split a scavenge into tasks.
// One child per setting: V8 prints through C's buffered stdout, so console.log cannot mark where
// a phase starts among its lines. The mark is V8's own: a full GC asked for once the setting is
// applied (the first `gc=mc` line; loading the child's modules takes scavenges, not full GCs).
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../router/config.ts';

const CHILD = `
import { applyGcScavenge } from './router/gc.ts';
for (const mode of process.argv.slice(1)) applyGcScavenge(mode);
gc();
let keep = [];
for (let i = 0; i < 4e6; i++) { keep.push({ a: i, b: [i] }); if (keep.length > 200000) keep = []; }
`;

/** The helper threads' time of each scavenge (ms) after a child applied `modes` in turn. */
function helperTimes(modes: string[]): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--trace-gc-nvp', '--expose-gc', '--import', 'tsx', '--input-type=module', '-e', CHILD, ...modes], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`child exited ${code}: ${err}`));
      const mark = out.indexOf(' gc=mc ');
      if (mark < 0) return reject(new Error('no full GC in the child\'s --trace-gc-nvp output'));
      const times: number[] = [];
      for (const m of out.slice(mark).matchAll(/gc=s .*?background\.scavenge\.parallel=([\d.]+)/g)) times.push(Number(m[1]));
      resolve(times);
    });
  });
}

describe('gc scavenge mode', () => {
  it('defaults to serial', () => {
    expect(DEFAULTS.gcScavenge).toBe('serial');
  });

  it('serial leaves helper threads out of every scavenge; parallel brings them back', async () => {
    const [untouched, serial, back] = await Promise.all([helperTimes([]), helperTimes(['serial']), helperTimes(['serial', 'parallel'])]);
    for (const t of [untouched, serial, back]) expect(t.length).toBeGreaterThan(3);
    // V8's default splits a big scavenge into tasks: some run on helper threads.
    expect(untouched.some((ms) => ms > 0)).toBe(true);
    expect(serial.every((ms) => ms === 0)).toBe(true);
    expect(back.some((ms) => ms > 0)).toBe(true);
  }, 60_000);
});
