import { randomUUID } from 'node:crypto';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { quotaAnswerSchema, quotaDtoSchema } from '../../src/quota/quota-schema.js';
import {
  adminUser,
  getPetMethodId,
  memberUser,
  petsApiId,
  petsConfig,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';

const systemId = '00000000-0000-0000-0000-000000000000';
const defaultId = '00000000-0000-0000-0000-000000000001';
const mobileAppId = '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
const otherApiMethodId = '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';

const throttle = (overrides: Record<string, unknown> = {}) => ({
  api: petsApiId,
  method: getPetMethodId,
  type: 'throttle',
  config: { messages: 10, per: '1', period: 'seconds' },
  ...overrides,
});
const quotaDto = (overrides: Record<string, unknown> = {}) => ({
  type: 'API',
  name: 'Pets',
  description: 'pets limit',
  restrictions: [throttle()],
  ...overrides,
});

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

describe.each(['memory', 'redis'] as const)('Quota API (%s store)', (storeType) => {
  let gateway: TestGateway;

  beforeAll(async () => {
    const store =
      storeType === 'redis'
        ? { store: { type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` } }
        : {};
    gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9', {
        ...store,
        applications: [
          { id: mobileAppId, name: 'Mobile', apikey_development: 'mobile-dev-key-0123456789abcdef' },
        ],
        apis: [
          ...(petsConfig('http://127.0.0.1:9').apis as unknown[]),
          {
            id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
            name: 'Store',
            basePath: '/store',
            upstream: 'http://127.0.0.1:9',
            methods: [{ id: otherApiMethodId, name: 'getInventory', verb: 'GET', path: '/inventory' }],
          },
        ],
      }),
    );
  });
  afterAll(() => gateway.close());

  async function call(
    method: string,
    path: string,
    options: {
      user?: { username: string; password: string } | null;
      body?: unknown;
      raw?: string;
      headers?: Record<string, string>;
    } = {},
  ): Promise<Answer> {
    const user = options.user === undefined ? adminUser : options.user;
    const headers: Record<string, string> = {
      ...(user ? { authorization: userAuth(user) } : {}),
      ...options.headers,
    };
    let body: string | undefined = options.raw;
    if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3${path}`, { method, headers, body });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  }

  const errorsOf = (answer: Answer) =>
    (answer.body as { errors: Array<{ code: number; message: string }> }).errors;

  describe('roles', () => {
    it('answers 401 with a Basic challenge without credentials or with wrong ones', async () => {
      const missing = await call('GET', '/quotas', { user: null });
      expect(missing.status).toBe(401);
      expect(missing.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
      expect(missing.body).toEqual({
        errors: [{ code: 401, message: 'admin credentials are missing or wrong' }],
      });
      expect((await call('GET', '/quotas', { user: { username: 'ann', password: 'wrong' } })).status).toBe(
        401,
      );
      expect((await call('GET', '/quotas', { user: { username: 'nobody', password: 'x' } })).status).toBe(
        401,
      );
    });

    it('lists every quota to an admin, and all but the System quota to a member', async () => {
      const asAdmin = (await call('GET', '/quotas')).body as Array<{ id: string }>;
      const asMember = (await call('GET', '/quotas', { user: memberUser })).body as Array<{ id: string }>;
      expect(asAdmin.map((quota) => quota.id)).toEqual(expect.arrayContaining([systemId, defaultId]));
      expect(asMember.map((quota) => quota.id)).toContain(defaultId);
      expect(asMember.map((quota) => quota.id)).not.toContain(systemId);
    });

    it('lets a member read quotas but not the System quota (403)', async () => {
      expect((await call('GET', `/quotas/${defaultId}`, { user: memberUser })).status).toBe(200);
      const system = await call('GET', `/quotas/${systemId}`, { user: memberUser });
      expect(system.status).toBe(403);
      expect(errorsOf(system)[0]!.code).toBe(403);
      expect((await call('GET', `/quotas/${systemId}`)).status).toBe(200);
    });

    it('refuses a member every write (403) and changes nothing', async () => {
      const before = (await call('GET', '/quotas')).body;
      expect((await call('POST', '/quotas', { user: memberUser, body: quotaDto() })).status).toBe(403);
      expect(
        (
          await call('PUT', `/quotas/${defaultId}`, {
            user: memberUser,
            body: quotaDto({ type: 'APPLICATION' }),
          })
        ).status,
      ).toBe(403);
      expect((await call('DELETE', `/quotas/${defaultId}`, { user: memberUser })).status).toBe(403);
      expect(
        (await call('POST', `/applications/${mobileAppId}/quota`, { user: memberUser, body: quotaDto() }))
          .status,
      ).toBe(403);
      expect((await call('DELETE', `/applications/${mobileAppId}/quota`, { user: memberUser })).status).toBe(
        403,
      );
      expect((await call('GET', '/quotas')).body).toEqual(before);
    });

    it("lets a member read an application's quota (the console's Applications tab shows it)", async () => {
      const answer = await call('GET', `/applications/${mobileAppId}/quota`, { user: memberUser });
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ id: defaultId, type: 'APPLICATION' });
    });
  });

  describe('the well-known quotas', () => {
    it('has System (API) and Application Default (APPLICATION) from the first start', async () => {
      expect((await call('GET', `/quotas/${systemId}`)).body).toMatchObject({
        id: systemId,
        name: 'System',
        type: 'API',
        system: true,
        restrictions: [],
      });
      expect((await call('GET', `/quotas/${defaultId}`)).body).toMatchObject({
        id: defaultId,
        type: 'APPLICATION',
        system: true,
      });
    });

    it('can update them but never delete them (403)', async () => {
      const updated = await call('PUT', `/quotas/${systemId}`, { body: quotaDto({ name: 'System' }) });
      expect(updated.status).toBe(200);
      expect(updated.body).toMatchObject({
        id: systemId,
        system: true,
        restrictions: [{ type: 'throttle' }],
      });
      expect((await call('DELETE', `/quotas/${systemId}`)).status).toBe(403);
      expect((await call('DELETE', `/quotas/${defaultId}`)).status).toBe(403);
      expect(
        (await call('PUT', `/quotas/${systemId}`, { body: quotaDto({ restrictions: [] }) })).status,
      ).toBe(200);
    });

    it('keeps the description of a well-known quota when a PUT sends none, and takes one it sends', async () => {
      const description = async (body: Record<string, unknown>) => {
        const answer = await call('PUT', `/quotas/${systemId}`, { body });
        expect(answer.status).toBe(200);
        return (answer.body as { description: string }).description;
      };
      const { description: _left, ...withoutDescription } = quotaDto({ name: 'System' });
      expect(await description(quotaDto({ description: 'All traffic' }))).toBe('All traffic');
      expect(await description(withoutDescription)).toBe('All traffic');
      expect(await description(quotaDto({ description: '' }))).toBe('');
    });

    it('keeps the type of a well-known quota', async () => {
      const answer = await call('PUT', `/quotas/${defaultId}`, { body: quotaDto({ type: 'API' }) });
      expect(answer.status).toBe(400);
      expect(errorsOf(answer)[0]!.message).toBe('type: must stay APPLICATION for this quota');
    });
  });

  describe('create, read, update, delete', () => {
    it('creates with 201, a server UUID, system false, Location and ETag; numbers come back as strings', async () => {
      const created = await call('POST', '/quotas', {
        body: quotaDto({
          id: 'client-id',
          system: true,
          restrictions: [
            throttle(),
            throttle({ type: 'throttlemb', verb: 'GET', config: { mb: 1.5, per: 2, period: 'minute' } }),
          ],
        }),
      });
      expect(created.status).toBe(201);
      const quota = created.body as { id: string };
      expect(quota.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(created.body).toEqual({
        id: quota.id,
        type: 'API',
        name: 'Pets',
        description: 'pets limit',
        restrictions: [
          {
            api: petsApiId,
            method: getPetMethodId,
            type: 'throttle',
            config: { messages: '10', per: '1', period: 'seconds' },
          },
          {
            api: petsApiId,
            method: getPetMethodId,
            verb: 'GET',
            type: 'throttlemb',
            config: { mb: '1.5', per: '2', period: 'minute' },
          },
        ],
        system: false,
      });
      expect(created.headers.get('location')).toBe(`/api/portal/v1.3/quotas/${quota.id}`);
      expect(created.headers.get('etag')).toMatch(/^"[0-9a-f]{40}"$/);
      const read = await call('GET', `/quotas/${quota.id}`);
      expect(read.body).toEqual(created.body);
      expect(read.headers.get('etag')).toBe(created.headers.get('etag'));
    });

    it('accepts * for api and method, several restrictions on one method, and a missing description', async () => {
      const created = await call('POST', '/quotas', {
        body: {
          type: 'API',
          name: 'everything',
          restrictions: [
            throttle({ api: '*', method: '*' }),
            throttle({ config: { messages: '1000', per: 1, period: 'day' } }),
          ],
        },
      });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        description: '',
        restrictions: [{ api: '*', method: '*' }, { method: getPetMethodId }],
      });
    });

    it('updates with PUT: the body wins over the quota query parameter; id and system stay', async () => {
      const created = (await call('POST', '/quotas', { body: quotaDto() })).body as { id: string };
      const updated = await call(
        'PUT',
        `/quotas/${created.id}?quota=${encodeURIComponent(JSON.stringify({ name: 'from query' }))}`,
        {
          body: quotaDto({ id: 'other', system: true, name: 'from body' }),
        },
      );
      expect(updated.status).toBe(200);
      expect(updated.body).toMatchObject({ id: created.id, name: 'from body', system: false });
      expect((await call('GET', `/quotas/${created.id}`)).body).toMatchObject({ name: 'from body' });
    });

    it('deletes with 204, after which the quota is 404', async () => {
      const created = (await call('POST', '/quotas', { body: quotaDto() })).body as { id: string };
      const deleted = await call('DELETE', `/quotas/${created.id}`);
      expect(deleted.status).toBe(204);
      expect(deleted.body).toBeUndefined();
      expect((await call('GET', `/quotas/${created.id}`)).status).toBe(404);
    });

    it('answers 404 for an unknown id on GET, PUT and DELETE', async () => {
      const unknown = randomUUID();
      for (const [method, body] of [
        ['GET', undefined],
        ['PUT', quotaDto()],
        ['DELETE', undefined],
      ] as const) {
        const answer = await call(method, `/quotas/${unknown}`, { body });
        expect(answer.status, method).toBe(404);
        expect(errorsOf(answer)).toEqual([{ code: 404, message: `no quota with id '${unknown}'` }]);
      }
    });
  });

  describe('lost updates (ETag / If-Match)', () => {
    it('refuses PUT and DELETE with a stale If-Match (412) and accepts the current one', async () => {
      const created = await call('POST', '/quotas', { body: quotaDto() });
      const id = (created.body as { id: string }).id;
      const firstTag = created.headers.get('etag')!;
      const second = await call('PUT', `/quotas/${id}`, {
        body: quotaDto({ name: 'second' }),
        headers: { 'if-match': firstTag },
      });
      expect(second.status).toBe(200);
      const stale = await call('PUT', `/quotas/${id}`, {
        body: quotaDto({ name: 'lost' }),
        headers: { 'if-match': firstTag },
      });
      expect(stale.status).toBe(412);
      expect((await call('DELETE', `/quotas/${id}`, { headers: { 'if-match': firstTag } })).status).toBe(412);
      expect((await call('GET', `/quotas/${id}`)).body).toMatchObject({ name: 'second' });
      expect(
        (await call('DELETE', `/quotas/${id}`, { headers: { 'if-match': second.headers.get('etag')! } }))
          .status,
      ).toBe(204);
    });

    it('treats If-Match: * as "any current version"', async () => {
      const id = ((await call('POST', '/quotas', { body: quotaDto() })).body as { id: string }).id;
      expect(
        (await call('PUT', `/quotas/${id}`, { body: quotaDto(), headers: { 'if-match': '*' } })).status,
      ).toBe(200);
    });

    it('never honours a weak If-Match tag, not even of the current version (412, strong comparison)', async () => {
      const created = await call('POST', '/quotas', { body: quotaDto() });
      const id = (created.body as { id: string }).id;
      const tag = created.headers.get('etag')!;
      for (const weak of [`W/${tag}`, `w/${tag}`, `W/${tag}, W/${tag}`]) {
        const put = await call('PUT', `/quotas/${id}`, {
          body: quotaDto({ name: 'weak' }),
          headers: { 'if-match': weak },
        });
        expect(put.status, weak).toBe(412);
        expect(errorsOf(put)[0]!.code).toBe(412);
        expect((await call('DELETE', `/quotas/${id}`, { headers: { 'if-match': weak } })).status, weak).toBe(
          412,
        );
      }
      expect((await call('GET', `/quotas/${id}`)).body).toMatchObject({ name: 'Pets' });
    });

    it('honours an If-Match list when any member is the current tag', async () => {
      const created = await call('POST', '/quotas', { body: quotaDto() });
      const id = (created.body as { id: string }).id;
      let tag = created.headers.get('etag')!;
      const stale = `"${'0'.repeat(40)}"`;
      for (const listOf of [
        (current: string) => `${stale}, ${current}`,
        (current: string) => `${current}, ${stale}`,
        (current: string) => `${stale},${current}`,
        (current: string) => `W/${current}, ${current}`,
        (current: string) => ` ${stale} ,  ${current} `,
        (current: string) => `${stale}, "a,b", ${current}`,
        (current: string) => `${stale}, , ${current},`,
      ]) {
        const list = listOf(tag);
        const put = await call('PUT', `/quotas/${id}`, {
          body: quotaDto({ name: list }),
          headers: { 'if-match': list },
        });
        expect(put.status, list).toBe(200);
        tag = put.headers.get('etag')!;
      }
      expect(
        (await call('DELETE', `/quotas/${id}`, { headers: { 'if-match': `${stale}, ${tag}` } })).status,
      ).toBe(204);
    });

    it('refuses an If-Match list without the current tag, or a malformed one (412), and changes nothing', async () => {
      const created = await call('POST', '/quotas', { body: quotaDto() });
      const id = (created.body as { id: string }).id;
      const tag = created.headers.get('etag')!;
      const bare = tag.slice(1, -1);
      for (const value of [
        `"${'0'.repeat(40)}", "${'1'.repeat(40)}"`,
        `"${'0'.repeat(40)}", W/${tag}`,
        bare,
        `"${bare}`,
        `${bare}"`,
        `'${bare}'`,
        `"*"`,
        `*, ${tag}`,
        `"${bare}" junk`,
        `""`,
        ',',
        '',
      ]) {
        const put = await call('PUT', `/quotas/${id}`, {
          body: quotaDto({ name: 'lost' }),
          headers: { 'if-match': value },
        });
        expect(put.status, value).toBe(412);
      }
      expect((await call('GET', `/quotas/${id}`)).body).toMatchObject({ name: 'Pets' });
    });
  });

  describe('validation: 400 naming the field', () => {
    it.each([
      ['an unknown quota type', quotaDto({ type: 'USER' }), 'type: must be one of APPLICATION, API'],
      [
        'an unknown restriction type',
        quotaDto({ restrictions: [throttle({ type: 'burst' })] }),
        'restrictions[0].type: must be one of throttle, throttlemb',
      ],
      [
        'an unknown period',
        quotaDto({ restrictions: [throttle({ config: { messages: 1, per: 1, period: 'fortnight' } })] }),
        'restrictions[0].config.period: must be one of second, seconds, minute, minutes, hour, hours, day, days, week, weeks',
      ],
      [
        'a negative number',
        quotaDto({ restrictions: [throttle({ config: { messages: -5, per: 1, period: 'second' } })] }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'zero',
        quotaDto({ restrictions: [throttle({ config: { messages: '0', per: 1, period: 'second' } })] }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'NaN',
        quotaDto({ restrictions: [throttle({ config: { messages: 'NaN', per: 1, period: 'second' } })] }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'a huge number',
        quotaDto({ restrictions: [throttle({ config: { messages: '1e400', per: 1, period: 'second' } })] }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'a fraction of a message',
        quotaDto({ restrictions: [throttle({ config: { messages: 1.5, per: 1, period: 'second' } })] }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'a window over 366 days',
        quotaDto({ restrictions: [throttle({ config: { messages: 1, per: 53, period: 'weeks' } })] }),
        'restrictions[0].config: the window (per × period) must not exceed 366 days',
      ],
      [
        'mb on a throttle',
        quotaDto({ restrictions: [throttle({ config: { messages: 1, mb: 1, per: 1, period: 'second' } })] }),
        'restrictions[0].config.mb: not allowed for type throttle',
      ],
      [
        'a missing mb on a throttlemb',
        quotaDto({ restrictions: [throttle({ type: 'throttlemb', config: { per: 1, period: 'second' } })] }),
        'restrictions[0].config.mb: is required',
      ],
      [
        'an api id not in the catalog',
        quotaDto({ restrictions: [throttle({ api: randomUUID() })] }),
        /^restrictions\[0\]\.api: no API of the catalog has id '/,
      ],
      [
        'a method id not in the catalog',
        quotaDto({ restrictions: [throttle({ method: 'nope' })] }),
        `restrictions[0].method: API '${petsApiId}' has no method with id 'nope' (or use *)`,
      ],
      [
        'a method of another API',
        quotaDto({ restrictions: [throttle({ method: otherApiMethodId })] }),
        `restrictions[0].method: API '${petsApiId}' has no method with id '${otherApiMethodId}' (or use *)`,
      ],
      [
        'a method under api *',
        quotaDto({ restrictions: [throttle({ api: '*' })] }),
        'restrictions[0].method: must be * when api is *',
      ],
      ['a missing name', { type: 'API', restrictions: [] }, 'name: is required'],
      [
        'a missing restriction field',
        quotaDto({ restrictions: [{ api: '*', method: '*', type: 'throttle' }] }),
        'restrictions[0].config: is required',
      ],
      ['a number for a name', quotaDto({ name: 42 }), 'name: must be a string'],
      [
        'an object for restrictions',
        quotaDto({ restrictions: { api: '*' } }),
        'restrictions: must be an array',
      ],
      ['a string for the body', 'quota', 'body: must be an object'],
      ['an unknown field', quotaDto({ owner: 'me' }), 'owner: unknown field'],
      [
        'a lower-case verb',
        quotaDto({ restrictions: [throttle({ verb: 'get' })] }),
        'restrictions[0].verb: must be one of GET, POST, PUT, PATCH, DELETE, OPTIONS',
      ],
    ])('rejects %s', async (_case, body, message) => {
      const before = ((await call('GET', '/quotas')).body as unknown[]).length;
      const answer = await call('POST', '/quotas', { body });
      expect(answer.status).toBe(400);
      const messages = errorsOf(answer).map((error) => error.message);
      if (typeof message === 'string') expect(messages).toContain(message);
      else expect(messages.some((text) => message.test(text))).toBe(true);
      expect(errorsOf(answer).every((error) => error.code === 400)).toBe(true);
      expect(((await call('GET', '/quotas')).body as unknown[]).length).toBe(before);
    });

    it('rejects deeply nested JSON with 400', async () => {
      const nested = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
      const answer = await call('POST', '/quotas', {
        raw: `{"type":"API","name":${nested},"restrictions":[]}`,
      });
      expect(answer.status).toBe(400);
      expect(errorsOf(answer)).toContainEqual({ code: 400, message: 'name: must be a string' });
    });

    it('rejects malformed JSON with 400', async () => {
      const answer = await call('POST', '/quotas', { raw: '{"type": "API",' });
      expect(answer.status).toBe(400);
    });

    it.each([
      '{"__proto__": {"polluted": true}, "type": "API", "name": "p", "restrictions": []}',
      '{"constructor": {"prototype": {"polluted": true}}, "type": "API", "name": "p", "restrictions": []}',
    ])('rejects prototype keys with 400 and pollutes nothing: %s', async (raw) => {
      const answer = await call('POST', '/quotas', { raw });
      expect(answer.status).toBe(400);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    it('rejects a body over 64 KiB with 413', async () => {
      const answer = await call('POST', '/quotas', {
        body: quotaDto({ description: 'x'.repeat(70 * 1024) }),
      });
      expect(answer.status).toBe(413);
      expect(errorsOf(answer)).toEqual([{ code: 413, message: 'the body is larger than 64 KiB' }]);
    });

    it('rejects a body that is not JSON with 415', async () => {
      expect(
        (
          await call('POST', '/quotas', {
            raw: 'type=API',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
          })
        ).status,
      ).toBe(415);
    });

    it.each([
      'text/plain',
      'text/plain; charset=utf-8',
      'text/json',
      'application/xml',
      'application/octet-stream',
      'application/json-patch+json',
      'application/jsonx',
      'application/x-json',
      'multipart/form-data; boundary=x',
      'json',
      '*/*',
    ])('refuses a JSON body sent as %s with 415 in the errors shape, and stores nothing', async (type) => {
      const before = ((await call('GET', '/quotas')).body as unknown[]).length;
      for (const method of ['POST', 'PUT'] as const) {
        const answer = await call(method, method === 'POST' ? '/quotas' : `/quotas/${defaultId}`, {
          raw: JSON.stringify(quotaDto({ type: 'APPLICATION' })),
          headers: { 'content-type': type },
        });
        expect(answer.status, `${method} ${type}`).toBe(415);
        expect(answer.body).toEqual({
          errors: [{ code: 415, message: 'the body must be application/json' }],
        });
      }
      expect(((await call('GET', '/quotas')).body as unknown[]).length).toBe(before);
    });

    it('refuses a body without a Content-Type with 415', async () => {
      const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas`, {
        method: 'POST',
        headers: { authorization: userAuth(adminUser) },
        body: new Uint8Array(Buffer.from(JSON.stringify(quotaDto()))),
      });
      expect(res.status).toBe(415);
      expect(await res.json()).toEqual({
        errors: [{ code: 415, message: 'the body must be application/json' }],
      });
    });

    it.each(['application/json', 'application/json; charset=utf-8', 'Application/JSON'])(
      'accepts a body sent as %s',
      async (type) => {
        const answer = await call('POST', '/quotas', {
          raw: JSON.stringify(quotaDto()),
          headers: { 'content-type': type },
        });
        expect(answer.status).toBe(201);
      },
    );

    it('accepts an empty body with Content-Type: application/json on DELETE', async () => {
      const id = ((await call('POST', '/quotas', { body: quotaDto() })).body as { id: string }).id;
      const answer = await call('DELETE', `/quotas/${id}`, {
        raw: '',
        headers: { 'content-type': 'application/json' },
      });
      expect(answer.status).toBe(204);
    });
  });

  describe("applications' own quotas", () => {
    const path = `/applications/${mobileAppId}/quota`;

    it('gives the Application Default until the application has its own, and again after DELETE', async () => {
      expect((await call('GET', path)).body).toMatchObject({ id: defaultId });
      const created = await call('POST', path, {
        body: quotaDto({ type: 'APPLICATION', name: 'Mobile quota' }),
      });
      expect(created.status).toBe(201);
      const own = created.body as { id: string };
      expect((await call('GET', path)).body).toMatchObject({
        id: own.id,
        name: 'Mobile quota',
        system: false,
      });
      expect((await call('POST', path, { body: quotaDto({ type: 'APPLICATION' }) })).status).toBe(409);
      const updated = await call('PUT', path, { body: quotaDto({ type: 'APPLICATION', name: 'Mobile v2' }) });
      expect(updated.body).toMatchObject({ id: own.id, name: 'Mobile v2' });
      expect((await call('GET', `/quotas/${own.id}`)).body).toMatchObject({ name: 'Mobile v2' });
      expect((await call('DELETE', path)).status).toBe(204);
      expect((await call('GET', path)).body).toMatchObject({ id: defaultId });
      expect((await call('DELETE', path)).status).toBe(404);
      // PUT gives it one again, as Axway does (test/admin/axway-compat.test.ts).
      expect((await call('PUT', path, { body: quotaDto({ type: 'APPLICATION' }) })).status).toBe(201);
    });

    it('knows the project application and refuses unknown applications (404)', async () => {
      expect((await call('GET', '/applications/project/quota')).status).toBe(200);
      expect((await call('GET', `/applications/${randomUUID()}/quota`)).status).toBe(404);
    });

    it('requires type APPLICATION', async () => {
      const answer = await call('POST', path, { body: quotaDto({ type: 'API' }) });
      expect(answer.status).toBe(400);
      expect(errorsOf(answer)[0]!.message).toBe("type: must be APPLICATION for an application's quota");
    });
  });

  describe('OpenAPI', () => {
    it('serves a valid OpenAPI 3 document generated from the validating schemas', async () => {
      const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/openapi.json`);
      expect(res.status).toBe(200);
      const document = (await res.json()) as {
        paths: Record<string, Record<string, unknown>>;
        components: { schemas: Record<string, unknown> };
      };
      const result = await new Validator().validate(document);
      expect(result.errors ?? []).toEqual([]);
      expect(result.valid).toBe(true);
      expect(Object.keys(document.paths).sort()).toEqual([
        '/api/portal/v1.3/applications',
        '/api/portal/v1.3/applications/{id}',
        '/api/portal/v1.3/applications/{id}/apikeys',
        '/api/portal/v1.3/applications/{id}/apikeys/{keyId}',
        '/api/portal/v1.3/applications/{id}/quota',
        '/api/portal/v1.3/console/try',
        '/api/portal/v1.3/currentuser',
        '/api/portal/v1.3/login',
        '/api/portal/v1.3/quotas',
        '/api/portal/v1.3/quotas/{id}',
        '/api/portal/v1.3/quotas/{id}/usage',
        '/api/portal/v1.3/refused-quotas',
      ]);
      expect(Object.keys(document.paths['/api/portal/v1.3/quotas/{id}']!).sort()).toEqual([
        'delete',
        'get',
        'put',
      ]);
      // The components are the zod schemas that validate requests and stored records, as JSON Schema.
      expect(document.components.schemas['QuotaDTO']).toEqual(
        z.toJSONSchema(quotaDtoSchema(), { io: 'input', target: 'openapi-3.0' }),
      );
      expect(document.components.schemas['Quota']).toEqual(
        z.toJSONSchema(quotaAnswerSchema, { io: 'output', target: 'openapi-3.0' }),
      );
      expect(document.components.schemas['QuotaDTO']).toMatchObject({
        required: ['type', 'name', 'restrictions'],
        additionalProperties: false,
        properties: { restrictions: { type: 'array', maxItems: 100 } },
      });
      const post = document.paths['/api/portal/v1.3/quotas']!['post'] as {
        requestBody: { content: Record<string, { schema: unknown }> };
      };
      expect(post.requestBody.content['application/json']!.schema).toEqual({
        $ref: '#/components/schemas/QuotaDTO',
      });
    });
  });
});
