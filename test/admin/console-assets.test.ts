import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleDirectory } from '../../src/admin/console-assets.js';
import { request } from '../helpers/raw-http.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * The console's page and scripts on the admin port: open to anyone (they hold no data), from the built
 * files only, under a Content-Security-Policy that allows nothing but this origin's own scripts, styles
 * and calls.
 */
let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startTestGateway(petsConfig('http://127.0.0.1:9'));
});
afterAll(() => gateway.close());

const send = (path: string, headers: Record<string, string> = {}) =>
  request(gateway.adminUrl, { path, headers });

describe('the console’s files', () => {
  it('serves the page at / with a strict policy: own scripts, styles and calls only, no inline code', async () => {
    const page = await send('/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toContain('<script type="module" src="/console/browser/main.js"></script>');
    const policy = String(page.headers['content-security-policy']);
    expect(policy).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
    );
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    // Every script and sheet the page names is served from here, as built.
    for (const asset of [
      '/console/browser/main.js',
      '/console/console.css',
      '/console/icon.svg',
      '/console/vendor/uPlot.esm.js',
      '/console/vendor/uPlot.min.css',
    ]) {
      const answer = await send(asset);
      expect(answer.status, asset).toBe(200);
      expect(answer.body, asset).toBe(
        readFileSync(`${consoleDirectory}${asset.slice('/console/'.length)}`, 'utf8'),
      );
    }
    expect((await send('/console/browser/main.js')).headers['content-type']).toBe(
      'text/javascript; charset=utf-8',
    );
  });

  it('lets the browser revalidate instead of downloading again (ETag, 304)', async () => {
    const first = await send('/console/browser/main.js');
    const etag = String(first.headers.etag);
    expect(etag).toMatch(/^"[\w-]{22}"$/);
    const again = await send('/console/browser/main.js', { 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.body).toBe('');
  });

  it.each([
    '/console/../package.json',
    '/console/%2e%2e/%2e%2e/package.json',
    '/console/..%2F..%2Fpackage.json',
    '/console/browser/../../../package.json',
    '/console/browser/main.ts',
    '/console/../api/portal/v1.3/quotas',
    '/console/%2e%2e/api/portal/v1.3/quotas',
  ])('serves no file but the built ones: %s is 404 and shows nothing', async (path) => {
    const answer = await send(path);
    expect(answer.status).toBe(404);
    expect(answer.body).not.toContain('quotagate');
    expect(answer.body).not.toContain('System');
  });

  it("answers a page script's call without credentials with no challenge, so no password dialog covers the login", async () => {
    const fromScript = await send('/api/portal/v1.3/quotas', {
      'sec-fetch-dest': 'empty',
      'sec-fetch-mode': 'cors',
    });
    expect(fromScript.status).toBe(401);
    expect(fromScript.headers['www-authenticate']).toBeUndefined();
    const fromClient = await send('/api/portal/v1.3/quotas');
    expect(fromClient.headers['www-authenticate']).toMatch(/^Basic realm=/);
  });
});
