import { describe, expect, it } from 'vitest';
import { getPetThrottle, quotaDto, useQuotaApiGateway } from '../helpers/quota-api-client.js';
import { adminUser, userAuth } from '../helpers/test-gateway.js';

/** The Quota API takes `concurrency` restrictions as it takes the other types: an extension of Axway's. */
const concurrencyOnGetPet = (config: unknown, extra: Record<string, unknown> = {}) =>
  getPetThrottle({ type: 'concurrency', config, ...extra });

describe.each(['memory', 'redis'] as const)('Quota API: concurrency restrictions (%s store)', (storeType) => {
  const { call, errorsOf, adminUrl } = useQuotaApiGateway(storeType);

  it.each([
    ['no connections', {}, 'restrictions[0].config.connections: is required'],
    [
      '0 connections',
      { connections: 0 },
      'restrictions[0].config.connections: must be a whole number from 1 to 1000000',
    ],
    [
      'more than a million connections',
      { connections: '1000001' },
      'restrictions[0].config.connections: must be a whole number from 1 to 1000000',
    ],
    [
      'a fraction of a connection',
      { connections: 2.5 },
      'restrictions[0].config.connections: must be a whole number from 1 to 1000000',
    ],
    [
      'connections that are no number',
      { connections: 'ten' },
      'restrictions[0].config.connections: must be a whole number from 1 to 1000000',
    ],
    [
      'a window',
      { connections: 5, per: 1, period: 'second' },
      'restrictions[0].config.per: not allowed for type concurrency',
    ],
    [
      'messages',
      { connections: 5, messages: 1 },
      'restrictions[0].config.messages: not allowed for type concurrency',
    ],
    ['a config that is no object', 5, 'restrictions[0].config: must be an object'],
  ])(
    'rejects a concurrency restriction with %s, naming the field, and stores nothing',
    async (_case, config, message) => {
      const before = ((await call('GET', '/quotas')).body as unknown[]).length;
      const answer = await call('POST', '/quotas', {
        body: quotaDto({ restrictions: [concurrencyOnGetPet(config)] }),
      });
      expect(answer.status).toBe(400);
      expect(errorsOf(answer)).toContainEqual({ code: 400, message });
      expect(((await call('GET', '/quotas')).body as unknown[]).length).toBe(before);
    },
  );

  it('rejects connections on another type', async () => {
    const throttle = getPetThrottle({ config: { messages: 1, per: 1, period: 'second', connections: 2 } });
    const answer = await call('POST', '/quotas', { body: quotaDto({ restrictions: [throttle] }) });
    expect(errorsOf(answer)).toContainEqual({
      code: 400,
      message: 'restrictions[0].config.connections: not allowed for type throttle',
    });
  });

  it('stores connections as a canonical string, in shadow mode too, and answers them on v1.3 and v1.4', async () => {
    const restrictions = [
      concurrencyOnGetPet({ connections: '007' }),
      concurrencyOnGetPet({ connections: 3 }, { mode: 'shadow' }),
    ];
    const created = await call('POST', '/quotas', { body: quotaDto({ restrictions }) });
    expect(created.status).toBe(201);
    const id = (created.body as { id: string }).id;
    const expected = [
      { ...concurrencyOnGetPet({ connections: '7' }) },
      { ...concurrencyOnGetPet({ connections: '3' }), mode: 'shadow' },
    ];
    expect((created.body as { restrictions: unknown[] }).restrictions).toEqual(expected);
    for (const version of ['v1.3', 'v1.4']) {
      const res = await fetch(`${adminUrl()}/api/portal/${version}/quotas/${id}`, {
        headers: { authorization: userAuth(adminUser) },
      });
      expect(((await res.json()) as { restrictions: unknown[] }).restrictions).toEqual(expected);
    }
    const usage = await call('GET', `/quotas/${id}/usage`);
    expect((usage.body as { restrictions: unknown[] }).restrictions[0]).toMatchObject({
      type: 'concurrency',
      unit: 'concurrent-requests',
      limit: 7,
      windowSeconds: 0,
      used: 0,
    });
  });

  it('documents the concurrency config in the OpenAPI document', async () => {
    const document = (await (await fetch(`${adminUrl()}/api/portal/v1.3/openapi.json`)).json()) as {
      components: { schemas: Record<string, unknown> };
    };
    const text = JSON.stringify(document.components.schemas['QuotaDTO']);
    expect(text).toContain('"enum":["concurrency"]');
    expect(text).toContain('Requests of its scope in flight at once: a whole number from 1 to 1000000');
  });
});
