import { mkdtempSync, mkdirSync, writeFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveStaticPath } from '../../host/static.ts';
import { addHostRoutes } from '../../host/http-api.ts';
import { createActions } from '../../host/actions.ts';
import { InFlightEvents } from '../../host/inflight.ts';
import { DASHBOARD_CSP_HEADER } from '../../host/csp.ts';
import { startFakeRouter, type FakeRouter } from './fake-router.ts';

const base = mkdtempSync(join(tmpdir(), 'baton-static-'));
const root = join(base, 'dist');
mkdirSync(join(root, 'assets'), { recursive: true });
writeFileSync(join(root, 'index.html'), '<!doctype html><title>Baton</title>');
writeFileSync(join(root, 'assets', 'index-abc.js'), 'console.log(1)');
writeFileSync(join(root, 'assets', 'index-abc.css'), 'body{}');
writeFileSync(join(base, 'secret.txt'), 'top secret');
symlinkSync(join(base, 'secret.txt'), join(root, 'assets', 'link.txt'));

/** A raw GET, so that `..` and odd encodings reach the server exactly as written. */
function get(url: string, path: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((done, fail) => {
    const req = request(`${url}${path}`, { method: 'GET', path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => done({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', fail);
    req.end();
  });
}

describe('resolveStaticPath', () => {
  it('maps / to index.html and assets to files under the root', () => {
    expect(resolveStaticPath(root, '/')).toBe(join(root, 'index.html'));
    expect(resolveStaticPath(root, '/assets/index-abc.js')).toBe(join(root, 'assets', 'index-abc.js'));
  });

  it.each([
    '/../secret.txt', '/assets/../../secret.txt', '/assets/..%2F..%2Fsecret.txt', '/%2e%2e/secret.txt',
    '/assets/%5c..%5csecret.txt', '/assets/x.js%00.html', '/.env', '/assets/noext', '/%E0%A4%A',
  ])('refuses %s', (path) => {
    expect(resolveStaticPath(root, path)).toBeNull();
  });
});

describe('static serving through the host routes', () => {
  let router: FakeRouter;
  beforeAll(async () => {
    router = await startFakeRouter();
    addHostRoutes(router, createActions({ router, inflight: new InFlightEvents(), sim: null, traffic: null }), root);
  });
  afterAll(() => router.close());

  it('serves the page with the CSP and the right content types', async () => {
    const page = await get(router.url, '/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toBe(DASHBOARD_CSP_HEADER);
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.body).toContain('<title>Baton</title>');
    const js = await get(router.url, '/assets/index-abc.js');
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(js.headers['cache-control']).toContain('immutable');
    expect((await get(router.url, '/assets/index-abc.css')).headers['content-type']).toBe('text/css; charset=utf-8');
  });

  it.each(['/assets/..%2F..%2Fsecret.txt', '/assets/%2e%2e%2fsecret.txt', '/assets/missing.js', '/assets/link.txt', '/nope'])(
    'answers 404 for %s',
    async (path) => {
      const res = await get(router.url, path);
      expect(res.status).toBe(404);
      expect(res.body).not.toContain('top secret');
    },
  );
});
