// router/gc.ts: the router's process scavenges on its main thread only, unless told otherwise.
// Checked on V8's own account of each scavenge (--trace-gc-nvp prints the time helper threads
// spent on it), in a child process that keeps enough alive for V8 to split a scavenge into tasks.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../router/config.ts';

const CHILD = `
import { applyGcScavenge } from './router/gc.ts';
const churn = () => {
  let keep = [];
  for (let i = 0; i < 4e6; i++) { keep.push({ a: i, b: [i] }); if (keep.length > 200000) keep = []; }
};
for (const mode of process.argv.slice(1)) {
  if (mode !== 'default') applyGcScavenge(mode);
  console.log('phase ' + mode);
  churn();
}
`;

/** Per phase, the helper threads' time of each scavenge (ms). */
function helperTimes(modes: string[]): Map<string, number[]> {
  const r = spawnSync(process.execPath, ['--trace-gc-nvp', '--import', 'tsx', '--input-type=module', '-e', CHILD, ...modes], { encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  const out = new Map<string, number[]>();
  let phase = '';
  for (const line of r.stdout.split('\n')) {
    const p = /^phase (\w+)/.exec(line);
    if (p) out.set((phase = p[1]!), []);
    const t = /gc=s .*background\.scavenge\.parallel=([\d.]+)/.exec(line);
    if (t && phase) out.get(phase)!.push(Number(t[1]));
  }
  return out;
}

describe('gc scavenge mode', () => {
  it('defaults to serial', () => {
    expect(DEFAULTS.gcScavenge).toBe('serial');
  });

  it('serial leaves helper threads out of every scavenge; parallel brings them back', () => {
    const t = helperTimes(['default', 'serial', 'parallel']);
    for (const phase of ['default', 'serial', 'parallel']) expect(t.get(phase)!.length, phase).toBeGreaterThan(3);
    // V8's default splits a big scavenge into tasks: some run on helper threads.
    expect(t.get('default')!.some((ms) => ms > 0)).toBe(true);
    // The first scavenge after the switch may have started before it; none after.
    expect(t.get('serial')!.slice(1).every((ms) => ms === 0)).toBe(true);
    expect(t.get('parallel')!.some((ms) => ms > 0)).toBe(true);
  });
});
