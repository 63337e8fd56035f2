import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange, request, type RawResponse } from '../helpers/raw-http.js';
import {
  adminUser,
  memberUser,
  petsConfig,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';

const systemId = '00000000-0000-0000-0000-000000000000';
const portal = '/api/portal/v1.3';
const admin = userAuth(adminUser);

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startTestGateway(petsConfig('http://127.0.0.1:9'));
});
afterAll(() => gateway.close());

const send = (path: string, options: { method?: string; headers?: Record<string, string | string[]> } = {}) =>
  request(gateway.adminUrl, { path, ...options });

/** The status line and headers of a raw HTTP/1.1 exchange, as the server wrote them. */
function head(raw: string): { status: number; headers: Record<string, string>; body: string } {
  const [top = '', ...rest] = raw.split('\r\n\r\n');
  const [statusLine = '', ...lines] = top.split('\r\n');
  const headers = Object.fromEntries(
    lines.map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()];
    }),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') };
}

function expectChallenge(answer: RawResponse, what: string): void {
  expect(answer.status, what).toBe(401);
  expect(answer.headers['www-authenticate'], what).toMatch(/^Basic realm=/);
  expect(JSON.parse(answer.body), what).toEqual({
    errors: [{ code: 401, message: 'admin credentials are missing or wrong' }],
  });
}

describe('admin authentication', () => {
  // Every spelling a router, a proxy or a client could turn into a Quota API path, and spellings of
  // paths that do not exist: without credentials, each is 401 and tells nothing more.
  it.each([
    `${portal}/quotas`,
    `http://localhost${portal}/quotas`,
    `HTTP://LOCALHOST${portal}/quotas`,
    `http://127.0.0.1:1${portal}/quotas/${systemId}`,
    `https://localhost${portal}/quotas?x=1`,
    '/api/portal/v1%2E3/quotas',
    '/api/portal/v1%2e3/quotas',
    `/api/portal/v1%2E3/quotas/${systemId}`,
    '/%61pi/portal/v1.3/quotas',
    `${portal}/%71uotas`,
    `${portal}/quotas%2F${systemId}`,
    `//api/portal/v1.3/quotas`,
    `/api//portal/v1.3/quotas`,
    `${portal}//quotas`,
    `${portal}/quotas//${systemId}`,
    `${portal}/./quotas`,
    `${portal}/x/../quotas`,
    `/API/portal/v1.3/quotas`,
    `/api/Portal/v1.3/quotas`,
    `${portal}/QUOTAS`,
    `${portal}/Quotas/${systemId}`,
    `${portal}/quotas/`,
    `${portal}/quotas;`,
    `${portal}/quotas;x=1`,
    `${portal}/quotas;/${systemId}`,
    `${portal};/quotas`,
    `${portal}/quotas%3Bx`,
    `${portal}/quotas?`,
    `${portal}/quotas?x=${portal}/openapi.json`,
    `${portal}/quotas#x`,
    `${portal}/quotas/${systemId}/usage`,
    `${portal}/applications/project/quota`,
    `${portal}/apis/openapi.json`,
    `${portal}/openapi.json/../quotas`,
    `${portal}/openapi.json;/../quotas`,
    `${portal}/openapi.json%2F..%2Fquotas`,
    `${portal}/`,
    portal,
    '/nope',
    '/index.html',
    '/healthz/../api/portal/v1.3/quotas',
    '/healthz;/api/portal/v1.3/quotas',
  ])('answers GET %s without credentials with 401 and nothing else', async (path) => {
    const answer = await send(path);
    expectChallenge(answer, path);
    expect(answer.body).not.toContain('System');
  });

  it.each(['HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE'])(
    'answers %s on Quota API paths and unknown paths without credentials with 401',
    async (method) => {
      for (const path of [`${portal}/quotas`, `${portal}/quotas/${systemId}`, '/nope', `${portal}/nope`]) {
        const answer = await send(path, { method });
        expect(answer.status, `${method} ${path}`).toBe(401);
        expect(answer.headers['www-authenticate'], `${method} ${path}`).toMatch(/^Basic realm=/);
      }
    },
  );

  it('answers an asterisk-form request target without credentials with 401', async () => {
    const answer = head(
      await rawExchange(
        gateway.adminUrl,
        'OPTIONS * HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
      ),
    );
    expect(answer.status).toBe(401);
  });

  it('asks for credentials before saying that a path does not exist (401, then 404 with them)', async () => {
    expectChallenge(await send('/nope'), '/nope');
    const known = await send('/nope', { headers: { authorization: admin } });
    expect(known.status).toBe(404);
    expect(JSON.parse(known.body)).toEqual({ errors: [{ code: 404, message: 'Not Found' }] });
  });

  it('serves health, readiness, metrics, latency and the Quota API OpenAPI document without credentials', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/latency', `${portal}/openapi.json`]) {
      expect((await send(path)).status, path).toBe(200);
      expect((await send(path, { method: 'HEAD' })).status, `HEAD ${path}`).toBe(200);
    }
    expect(JSON.parse((await send(`${portal}/openapi.json`)).body)).toMatchObject({ openapi: '3.0.3' });
  });

  it('does not let a public path lend its exemption to another path', async () => {
    for (const path of [
      `${portal}/openapi.json?/quotas`,
      `/healthz?${portal}/quotas`,
      `/metrics#${portal}/quotas`,
    ]) {
      const answer = await send(path);
      expect(answer.status, path).toBe(200);
      expect(answer.body, path).not.toContain(systemId);
    }
  });

  it('answers a Quota API path with the credentials of a user', async () => {
    expect((await send(`${portal}/quotas`, { headers: { authorization: admin } })).status).toBe(200);
    const absolute = await send(`http://localhost${portal}/quotas`, { headers: { authorization: admin } });
    expect(absolute.status).toBe(200);
  });

  describe('two Authorization headers', () => {
    it.each([
      ['a valid one first', [admin, 'Basic Zm9vOmJhcg==']],
      ['a valid one last', ['Basic Zm9vOmJhcg==', admin]],
      ['the same valid one twice', [admin, admin]],
      ['an admin and a member', [userAuth(memberUser), admin]],
      ['a valid one and an empty one', [admin, '']],
    ])('refuses two Authorization headers with 401: %s', async (_case, values) => {
      for (const path of [`${portal}/quotas`, `${portal}/quotas/${systemId}`]) {
        const answer = await send(path, { headers: { authorization: values } });
        expectChallenge(answer, path);
      }
    });

    it('refuses two Authorization header lines sent raw with 401', async () => {
      const raw = await rawExchange(
        gateway.adminUrl,
        `GET ${portal}/quotas HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${admin}\r\nauthorization: Basic eDp5\r\nConnection: close\r\n\r\n`,
      );
      expect(head(raw).status).toBe(401);
    });

    it('refuses a second Authorization header after a valid one even once the credentials are remembered', async () => {
      expect((await send(`${portal}/quotas`, { headers: { authorization: admin } })).status).toBe(200);
      const answer = await send(`${portal}/quotas`, { headers: { authorization: [admin, admin] } });
      expect(answer.status).toBe(401);
    });
  });

  describe('framework errors: credentials first, then the documented error shape', () => {
    const longId = (length: number) => 'a'.repeat(length);

    it.each([
      ['an id of 101 characters', `${portal}/quotas/${longId(101)}`],
      ['an id of 200 characters', `${portal}/quotas/${longId(200)}`],
      ['an id of 201 characters', `${portal}/quotas/${longId(201)}`],
      ['an id of 5000 characters', `${portal}/quotas/${longId(5000)}`],
      ['an application id of 150 characters', `${portal}/applications/${longId(150)}/quota`],
      ['%ff in an id', `${portal}/quotas/%ff`],
      ['a lone % in an id', `${portal}/quotas/%`],
      ['%zz in the path', `${portal}/quotas/%zz`],
      ['%ff in an unknown path', '/%ff'],
      ['%c0%af in the path', `${portal}/%c0%af/quotas`],
    ])('answers %s without credentials with 401', async (_case, path) => {
      expectChallenge(await send(path), path);
    });

    it('lets ids of up to 200 characters reach the route: 404 for an unknown one', async () => {
      for (const length of [101, 150, 200]) {
        const id = longId(length);
        for (const method of ['GET', 'DELETE']) {
          const answer = await send(`${portal}/quotas/${id}`, { method, headers: { authorization: admin } });
          expect(answer.status, `${method} ${length}`).toBe(404);
          expect(JSON.parse(answer.body), `${method} ${length}`).toEqual({
            errors: [{ code: 404, message: `no quota with id '${id}'` }],
          });
        }
        const application = await send(`${portal}/applications/${id}/quota`, {
          headers: { authorization: admin },
        });
        expect(application.status, `application ${length}`).toBe(404);
        expect(JSON.parse(application.body)).toEqual({
          errors: [{ code: 404, message: `no application with id '${id}'` }],
        });
      }
    });

    it('answers an id longer than 200 characters with a 400 in the documented shape', async () => {
      for (const length of [201, 700, 5000]) {
        const answer = await send(`${portal}/quotas/${longId(length)}`, {
          headers: { authorization: admin },
        });
        expect(answer.status, String(length)).toBe(400);
        expect(JSON.parse(answer.body), String(length)).toEqual({
          errors: [{ code: 400, message: 'id: must be at most 200 characters' }],
        });
      }
    });

    it('answers a path that is not valid percent-encoding with a 400 in the documented shape', async () => {
      for (const path of [`${portal}/quotas/%ff`, `${portal}/quotas/%`, '/%ff', `${portal}/quotas/%c0%af`]) {
        const answer = await send(path, { headers: { authorization: admin } });
        expect(answer.status, path).toBe(400);
        expect(answer.headers['content-type'], path).toMatch(/^application\/json/);
        expect(JSON.parse(answer.body), path).toEqual({
          errors: [{ code: 400, message: 'path: not valid percent-encoded UTF-8' }],
        });
      }
    });

    it('answers a request the HTTP parser refuses with a 400 in the documented shape', async () => {
      const answer = head(
        await rawExchange(gateway.adminUrl, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n'),
      );
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body)).toEqual({ errors: [{ code: 400, message: 'Bad Request' }] });
    });
  });

  describe('security headers', () => {
    const expected = {
      'x-content-type-options': 'nosniff',
      'cache-control': 'no-store',
      'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
      'referrer-policy': 'no-referrer',
      'x-frame-options': 'DENY',
    };

    it.each([
      ['health', '/healthz', {}],
      ['readiness', '/readyz', {}],
      ['metrics', '/metrics', {}],
      ['the OpenAPI document', `${portal}/openapi.json`, {}],
      ['the catalog OpenAPI document', `${portal}/apis/openapi.json`, { authorization: admin }],
      ['a quota list', `${portal}/quotas`, { authorization: admin }],
      ['a quota', `${portal}/quotas/${systemId}`, { authorization: admin }],
      ['a 401', `${portal}/quotas`, {}],
      ['a 401 on an unknown path', '/nope', {}],
      ['a 403', `${portal}/quotas/${systemId}`, { authorization: userAuth(memberUser) }],
      ['a 404', '/nope', { authorization: admin }],
      ['a 404 quota', `${portal}/quotas/nope`, { authorization: admin }],
      ['a bad URL without credentials', `${portal}/quotas/%ff`, {}],
      ['a bad URL', `${portal}/quotas/%ff`, { authorization: admin }],
      ['a long id', `${portal}/quotas/${'a'.repeat(300)}`, { authorization: admin }],
    ])('sends them on %s', async (_case, path, headers: Record<string, string>) => {
      const answer = await send(path, { headers });
      expect(answer.headers).toMatchObject(expected);
    });

    it('sends them on writes and on errors of the body', async () => {
      const json = { authorization: admin, 'content-type': 'application/json' };
      const body = JSON.stringify({ type: 'API', name: 'n', restrictions: [] });
      const created = await request(gateway.adminUrl, {
        method: 'POST',
        path: `${portal}/quotas`,
        headers: json,
        body,
      });
      expect(created.status).toBe(201);
      expect(created.headers).toMatchObject(expected);
      const id = (JSON.parse(created.body) as { id: string }).id;
      for (const answer of [
        await request(gateway.adminUrl, {
          method: 'POST',
          path: `${portal}/quotas`,
          headers: json,
          body: '{',
        }),
        await request(gateway.adminUrl, {
          method: 'POST',
          path: `${portal}/quotas`,
          headers: { ...json, 'content-type': 'text/plain' },
          body,
        }),
        await request(gateway.adminUrl, {
          method: 'POST',
          path: `${portal}/quotas`,
          headers: json,
          body: JSON.stringify({ type: 'API', name: 'x'.repeat(70_000), restrictions: [] }),
        }),
        await request(gateway.adminUrl, { method: 'DELETE', path: `${portal}/quotas/${id}`, headers: json }),
      ]) {
        expect(answer.headers).toMatchObject(expected);
      }
    });

    it('answers headers larger than maxHeaderSize with a 431 in the documented shape, with them', async () => {
      const answer = head(
        await rawExchange(
          gateway.adminUrl,
          `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
        ),
      );
      expect(answer.status).toBe(431);
      expect(answer.headers).toMatchObject(expected);
      expect(JSON.parse(answer.body)).toEqual({
        errors: [{ code: 431, message: 'Request Header Fields Too Large' }],
      });
    });

    it('sends them on answers of the HTTP parser', async () => {
      const answer = head(
        await rawExchange(gateway.adminUrl, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n'),
      );
      expect(answer.headers).toMatchObject(expected);
    });
  });
});
