// `baton view` keeps the stored theme: a trace file's page on a new port (a new origin, whose
// localStorage has no theme) applies the preferences its server keeps, and saves a change there.
import { describe, expect, it } from 'vitest';
import { fileHost } from '../../renderer/src/host/file.ts';
import { renderTraceFile } from '../../renderer/src/store/trace-file.ts';
import { fileSource } from '../../renderer/src/views/App.tsx';
import type { TraceRow } from '../../router/trace/row.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import { requestEvents } from './scenario.ts';

const T0 = 1_796_000_000_000;
const rows: TraceRow[] = requestEvents('r', T0, 9, [{ worker: 'http://127.0.0.1:41001', tokens: 9 }])
  .flatMap((e: BatonEvent) => (e.type === 'attempt_ended' || e.type === 'request_finished' ? [e.row] : []));

describe('a trace file\'s page and the stored preferences', () => {
  it('applies the theme the server keeps, and saves a new one there', async () => {
    const saved: Record<string, unknown>[] = [];
    const prefs = { prefs: async () => ({ theme: 'dark' }), savePrefs: async (p: Record<string, unknown>) => void saved.push(p) };
    const source = fileSource(fileHost('x.jsonl', renderTraceFile(rows, 'jsonl')), prefs);
    await source.prefsRead;
    expect(source.store.getState().theme).toBe('dark');
    source.store.getState().setTheme('light');
    expect(saved.at(-1)).toMatchObject({ theme: 'light' });
  });
});
