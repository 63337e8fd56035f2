import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  getPetThrottle,
  otherApiMethodId,
  quotaDto,
  useQuotaApiGateway,
} from '../helpers/quota-api-client.js';
import {
  adminUser,
  applicationDefaultQuotaId,
  getPetMethodId,
  petsApiId,
  userAuth,
} from '../helpers/test-gateway.js';

describe.each(['memory', 'redis'] as const)('Quota API: validation (%s store)', (storeType) => {
  const { call, errorsOf, adminUrl } = useQuotaApiGateway(storeType);

  describe('validation: 400 naming the field', () => {
    it.each([
      ['an unknown quota type', quotaDto({ type: 'USER' }), 'type: must be one of APPLICATION, API'],
      [
        'an unknown restriction type',
        quotaDto({ restrictions: [getPetThrottle({ type: 'burst' })] }),
        'restrictions[0].type: must be one of throttle, throttlemb, throttleunits, concurrency',
      ],
      [
        'an unknown period',
        quotaDto({
          restrictions: [getPetThrottle({ config: { messages: 1, per: 1, period: 'fortnight' } })],
        }),
        'restrictions[0].config.period: must be one of second, seconds, minute, minutes, hour, hours, day, days, week, weeks, month, months, year, years',
      ],
      [
        'a negative number',
        quotaDto({ restrictions: [getPetThrottle({ config: { messages: -5, per: 1, period: 'second' } })] }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'zero',
        quotaDto({ restrictions: [getPetThrottle({ config: { messages: '0', per: 1, period: 'second' } })] }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'NaN',
        quotaDto({
          restrictions: [getPetThrottle({ config: { messages: 'NaN', per: 1, period: 'second' } })],
        }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'a huge number',
        quotaDto({
          restrictions: [getPetThrottle({ config: { messages: '1e400', per: 1, period: 'second' } })],
        }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'a fraction of a message',
        quotaDto({ restrictions: [getPetThrottle({ config: { messages: 1.5, per: 1, period: 'second' } })] }),
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
      ],
      [
        'a window over 366 days',
        quotaDto({ restrictions: [getPetThrottle({ config: { messages: 1, per: 53, period: 'weeks' } })] }),
        'restrictions[0].config: the window (per × period) must not exceed 366 days',
      ],
      [
        'mb on a throttle',
        quotaDto({
          restrictions: [getPetThrottle({ config: { messages: 1, mb: 1, per: 1, period: 'second' } })],
        }),
        'restrictions[0].config.mb: not allowed for type throttle',
      ],
      [
        'a missing mb on a throttlemb',
        quotaDto({
          restrictions: [getPetThrottle({ type: 'throttlemb', config: { per: 1, period: 'second' } })],
        }),
        'restrictions[0].config.mb: is required',
      ],
      [
        'a throttleunits without its header or body',
        quotaDto({
          restrictions: [
            getPetThrottle({ type: 'throttleunits', config: { units: 10, per: 1, period: 'hour' } }),
          ],
        }),
        'restrictions[0].config.header: is required unless body is given',
      ],
      [
        'a body path that is no path',
        quotaDto({
          restrictions: [
            getPetThrottle({
              type: 'throttleunits',
              config: { units: 10, per: 1, period: 'hour', body: 'usage..total_tokens' },
            }),
          ],
        }),
        'restrictions[0].config.body: must be property names (letters, digits, _ and -) joined by dots, like usage.total_tokens',
      ],
      [
        'a list of body paths with a wrong one',
        quotaDto({
          restrictions: [
            getPetThrottle({
              type: 'throttleunits',
              config: { units: 10, per: 1, period: 'hour', body: ['usage.input_tokens', 'usage[0]'] },
            }),
          ],
        }),
        'restrictions[0].config.body: [1]: must be property names (letters, digits, _ and -) joined by dots, like usage.total_tokens',
      ],
      [
        'an empty list of body paths',
        quotaDto({
          restrictions: [
            getPetThrottle({
              type: 'throttleunits',
              config: { units: 10, per: 1, period: 'hour', body: [] },
            }),
          ],
        }),
        'restrictions[0].config.body: must list 1 to 8 paths',
      ],
      [
        'a number for the body paths',
        quotaDto({
          restrictions: [
            getPetThrottle({ type: 'throttleunits', config: { units: 10, per: 1, period: 'hour', body: 5 } }),
          ],
        }),
        'restrictions[0].config.body: must be a path, or a list of 1 to 8 paths, of property names (letters, digits, _ and -) joined by dots, like usage.total_tokens',
      ],
      [
        'body paths on a throttle',
        quotaDto({
          restrictions: [getPetThrottle({ config: { messages: 1, per: 1, period: 'hour', body: 'usage' } })],
        }),
        'restrictions[0].config.body: not allowed for type throttle',
      ],
      [
        'a header that is no field name',
        quotaDto({
          restrictions: [
            getPetThrottle({
              type: 'throttleunits',
              config: { units: 10, per: 1, period: 'hour', header: 'x tokens' },
            }),
          ],
        }),
        'restrictions[0].config.header: must be an HTTP field name of at most 64 characters',
      ],
      [
        'a negative default of throttleunits',
        quotaDto({
          restrictions: [
            getPetThrottle({
              type: 'throttleunits',
              config: { units: 10, per: 1, period: 'hour', header: 'x-tokens', default: -1 },
            }),
          ],
        }),
        'restrictions[0].config.default: must be a whole number from 0 to 999999999999999',
      ],
      [
        'messages on a throttleunits',
        quotaDto({
          restrictions: [
            getPetThrottle({
              type: 'throttleunits',
              config: { units: 10, messages: 1, per: 1, period: 'hour', header: 'x-tokens' },
            }),
          ],
        }),
        'restrictions[0].config.messages: not allowed for type throttleunits',
      ],
      [
        'an api id not in the catalog',
        quotaDto({ restrictions: [getPetThrottle({ api: randomUUID() })] }),
        /^restrictions\[0\]\.api: no API of the catalog has id '/,
      ],
      [
        'a method id not in the catalog',
        quotaDto({ restrictions: [getPetThrottle({ method: 'nope' })] }),
        `restrictions[0].method: API '${petsApiId}' has no method with id 'nope' (or use *); its methods: '8b0e6c1a-3f47-4f0e-a2f5-6d9c1e7b4a21' (listPets), '${getPetMethodId}' (getPet), '0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f' (findByStatus), 'e7a3b5c9-0d14-4b2e-8f6a-9c1d3e5f7a43' (addPet)`,
      ],
      [
        'a method of another API',
        quotaDto({ restrictions: [getPetThrottle({ method: otherApiMethodId })] }),
        `restrictions[0].method: API '${petsApiId}' has no method with id '${otherApiMethodId}' (or use *); it is a method of API '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d' (Store)`,
      ],
      [
        'a method under api *',
        quotaDto({ restrictions: [getPetThrottle({ api: '*' })] }),
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
        quotaDto({ restrictions: [getPetThrottle({ verb: 'get' })] }),
        'restrictions[0].verb: must be one of GET, POST, PUT, PATCH, DELETE, OPTIONS (did you mean GET?)',
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
        const answer = await call(
          method,
          method === 'POST' ? '/quotas' : `/quotas/${applicationDefaultQuotaId}`,
          {
            raw: JSON.stringify(quotaDto({ type: 'APPLICATION' })),
            headers: { 'content-type': type },
          },
        );
        expect(answer.status, `${method} ${type}`).toBe(415);
        expect(answer.body).toEqual({
          errors: [{ code: 415, message: 'the body must be application/json' }],
        });
      }
      expect(((await call('GET', '/quotas')).body as unknown[]).length).toBe(before);
    });

    it('refuses a body without a Content-Type with 415', async () => {
      const res = await fetch(`${adminUrl()}/api/portal/v1.3/quotas`, {
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
});
