import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  type GatewayOverUpstream,
  startGatewayOverUpstream,
  type TestGateway,
} from '../helpers/test-gateway.js';
import type { TestUpstream } from '../helpers/upstream.js';

/**
 * CGI-style upstream stacks (WSGI servers such as Python's wsgiref, Rack servers before Puma's fix for
 * CVE-2024-45614, PHP behind servers that pass such names) read a request field from the environment
 * variable `HTTP_<NAME>`, made by upper-casing the name and turning `-` into `_`. `X_Original_URL` and
 * `X-Original-URL` are then one field upstream: the gateway must screen every spelling an upstream reads
 * as a refused or dropped field, not only the dashed one.
 */

const authorization = basicAuth(devKey);

let upstream: TestUpstream;
let gateway: TestGateway;
let setup: GatewayOverUpstream;

beforeAll(async () => {
  setup = await startGatewayOverUpstream();
  ({ upstream, gateway } = setup);
});

afterAll(() => setup.close());

/** The field names an upstream request carried, as the upstream's CGI environment would name them. */
const cgiNames = (rawHeaders: string[]) =>
  rawHeaders.filter((_, i) => i % 2 === 0).map((name) => `HTTP_${name.toUpperCase().replace(/-/g, '_')}`);

describe('underscore spellings of the fields the gateway screens', () => {
  it.each([
    ['X_Original_URL', '/pets/findByStatus'],
    ['X_Rewrite_URL', '/admin'],
    ['X_HTTP_Method_Override', 'DELETE'],
    ['x_http_method', 'DELETE'],
    ['X-HTTP_Method-Override', 'DELETE'],
  ])('answers 400 to %s, which CGI-style upstreams read as the refused field', async (name, value) => {
    const before = upstream.requests.length;
    const res = await request(gateway.url, { path: '/pets/1', headers: { authorization, [name]: value } });
    expect(res.status).toBe(400);
    expect(upstream.requests.length).toBe(before);
  });

  it.each([
    ['X_Real_IP', 'HTTP_X_REAL_IP'],
    ['X_Forwarded_For', 'HTTP_X_FORWARDED_FOR'],
    ['X-Forwarded_Host', 'HTTP_X_FORWARDED_HOST'],
    ['True_Client_IP', 'HTTP_TRUE_CLIENT_IP'],
  ])(
    'does not forward %s from an untrusted peer, which CGI-style upstreams read as %s',
    async (name, cgiName) => {
      const res = await request(gateway.url, {
        path: '/pets/1',
        headers: { authorization, [name]: '6.6.6.6' },
      });
      expect(res.status).toBe(200);
      const seen = upstream.requests.at(-1)!;
      // Only the gateway's own value may reach that variable (X-Forwarded-For and -Host are set by it).
      const spellings = cgiNames(seen.rawHeaders).filter((variable) => variable === cgiName);
      expect(spellings.length).toBeLessThanOrEqual(1);
      expect(seen.rawHeaders).not.toContain('6.6.6.6');
    },
  );
});
