// The Traces view behind the hub: the hub names rows `<label>/<id>`; the table's router filter
// keeps one router's rows, the id prefix matches the client's id as well as the hub's name, and
// an export asks the hub (or a file) for the same rows by the prefix `<label>/`.
import { describe, expect, it } from 'vitest';
import type { TraceRow } from '../../router/trace/row.ts';
import { exportFilter, rowMatches } from '../../renderer/src/views/TracesView.tsx';
import { matchesExport } from '../../renderer/src/host/file.ts';

function row(id: string): TraceRow {
  return { kind: 'request', request_id: id, started_at: 1, ended_at: 2, outcome: 'finished' } as unknown as TraceRow;
}

describe('Traces rows behind the hub', () => {
  const rows = [row('r0/abc'), row('r1/abc'), row('r1/xyz')];

  it('the router filter keeps one router\'s rows', () => {
    expect(rows.filter((r) => rowMatches(r, { router: 'r1' }, true)).map((r) => r.request_id)).toEqual(['r1/abc', 'r1/xyz']);
    expect(rows.filter((r) => rowMatches(r, {}, true))).toHaveLength(3);
  });

  it('the id prefix matches the client\'s id behind the hub, and the hub\'s name', () => {
    expect(rows.filter((r) => rowMatches(r, { request: 'ab' }, true)).map((r) => r.request_id)).toEqual(['r0/abc', 'r1/abc']);
    expect(rows.filter((r) => rowMatches(r, { request: 'r1/x' }, true)).map((r) => r.request_id)).toEqual(['r1/xyz']);
    expect(rows.filter((r) => rowMatches(r, { request: 'ab', router: 'r0' }, true)).map((r) => r.request_id)).toEqual(['r0/abc']);
    // Without a hub an id is matched as it is.
    expect(rows.filter((r) => rowMatches(r, { request: 'ab' }))).toHaveLength(0);
  });

  it('an export asks for the router\'s rows by its label as a prefix', () => {
    expect(exportFilter({ router: 'r1', request: 'ab', kind: 'request' })).toEqual({ kind: 'request', requestPrefix: 'r1/ab' });
    expect(exportFilter({ router: 'r1' })).toEqual({ requestPrefix: 'r1/' });
    expect(exportFilter({ request: 'ab' })).toEqual({ requestPrefix: 'ab' });
    expect(exportFilter({})).toEqual({});
    expect(rows.filter((r) => matchesExport(r, exportFilter({ router: 'r1' }))).map((r) => r.request_id)).toEqual(['r1/abc', 'r1/xyz']);
  });
});
