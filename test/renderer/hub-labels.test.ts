// Behind the hub a page id is `<label>/<id>`: the copies give the id the router and client know,
// a replay goes to an address that serves requests, the header names the hub's own port as the
// hub, plain routers show no replica/epoch, and a lost router counts in the matrix.
import { describe, expect, it } from 'vitest';
import type { WorkerMatrixRow } from '../../host/contract.ts';
import { hubOf, link } from './hub-fixtures.ts';
import type { RequestView } from '../../renderer/src/store/request-view.ts';
import { NO_FILTERS, visibleIds } from '../../renderer/src/store/filters.ts';
import { addressName, matrixHealth, replayAddress, replicaNote, splitHubId } from '../../renderer/src/store/hub-labels.ts';

const A = 'http://127.0.0.1:30080';
const B = 'http://127.0.0.1:30081';

describe('hub labels', () => {
  it("reads the router's label apart from the client's id; one router's ids stay whole", () => {
    const hub = hubOf([link('r0', A), link('r1', B)], null);
    expect(splitHubId('r1/9b46', hub)).toEqual({ router: 'r1', clientId: '9b46' });
    // A client id with a slash in it keeps it; only a known label is read off.
    expect(splitHubId('r1/a/b', hub)).toEqual({ router: 'r1', clientId: 'a/b' });
    expect(splitHubId('x9/abc', hub)).toEqual({ router: null, clientId: 'x9/abc' });
    expect(splitHubId('r1/9b46', null)).toEqual({ router: null, clientId: 'r1/9b46' });
  });

  it('a replay goes to the shared port of replicas, else to the router that owns it; the header names the hub as the hub', () => {
    const replicas = hubOf([link('r0', 'http://127.0.0.1:41001', { replica: { id: 'a', index: 0, epoch: 0 } }), link('r1', 'http://127.0.0.1:41002', { replica: { id: 'b', index: 1, epoch: 0 } })], A);
    expect(replayAddress('r1/abc', replicas, A)).toBe(A);
    expect(addressName(replicas)).toBe('router');
    const routers = hubOf([link('r0', A), link('r1', B)], null);
    expect(replayAddress('r1/abc', routers, 'http://127.0.0.1:5999')).toBe(B);
    expect(addressName(routers)).toBe('hub');
    expect(replayAddress('abc', null, A)).toBe(A);
    expect(addressName(null)).toBe('router');
  });

  it('plain routers show no replica or epoch; replicas of a set do', () => {
    const plain = [link('r0', A, { replica: { id: 'a', index: 0, epoch: 0 } }), link('r1', B, { replica: { id: 'b', index: 0, epoch: 0 } })];
    expect(plain.map((r) => replicaNote(r, plain))).toEqual([null, null]);
    const set = [link('r0', A, { replica: { id: 'a', index: 0, epoch: 0 } }), link('r1', B, { replica: { id: 'b', index: 1, epoch: 2 } })];
    expect(set.map((r) => replicaNote(r, set))).toEqual(['replica 0 epoch 0', 'replica 1 epoch 2']);
  });

  it('a lost router counts in the matrix and is named', () => {
    const routers = [link('r0', A), link('r1', B, { state: 'lost' })];
    const w: WorkerMatrixRow = { id: 'w0', url: 'http://127.0.0.1:9000', in_flight: 0, healthy: 1, of: 1, health: { r0: 'healthy' } };
    expect(matrixHealth(w, routers)).toEqual({ words: 'healthy on 1 of 2 (r1 lost)', lost: ['r1'] });
    expect(matrixHealth(w, [link('r0', A)]).words).toBe('healthy on 1 of 1');
  });
});

describe('the router as a filter of the request list', () => {
  const view = (id: string): RequestView => ({ id, seq: 0, startedAt: 0, endedAt: 1, status: 'finished', admitted: true, admissionReason: null, stream: true, promptTokens: 8, maxNewTokens: 10, attempts: [], migrations: [], completionTokens: 0, error: null, summary: null, format: null, front: null, traceId: null });
  const ids = ['r0/abc', 'r1/abd', 'r1/xyz'];

  it("keeps one router's requests, by its label", () => {
    expect(visibleIds(ids, view, { ...NO_FILTERS, router: 'r1' }, null, true)).toEqual(['r1/xyz', 'r1/abd']);
    expect(visibleIds(ids, view, { ...NO_FILTERS, router: null }, null, true)).toEqual(['r1/xyz', 'r1/abd', 'r0/abc']);
  });

  it("searches the client's id (the id column) as well as the hub's", () => {
    expect(visibleIds(ids, view, { ...NO_FILTERS, search: 'ab' }, null, true)).toEqual(['r1/abd', 'r0/abc']);
    expect(visibleIds(ids, view, { ...NO_FILTERS, search: 'r1/x' }, null, true)).toEqual(['r1/xyz']);
    // One router: an id is matched whole, as before.
    expect(visibleIds(['a/b'], view, { ...NO_FILTERS, search: 'b' })).toEqual([]);
  });
});
