import { describe, expect, it } from 'vitest';
import type { ConfigError } from '../../src/kit/config-error.js';
import { loadConfig } from '../../src/config/load-config.js';
import {
  adminCall,
  applicationDefaultQuotaId,
  basicAuth,
  getPetMethodId,
  petsApiId,
  petsConfig,
  startTestGateway,
  systemQuotaId,
  throttle,
  writeConfigDir,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * Quotas declared in conf/ (`quotas`): written into the store at start and at each reload, enforced,
 * and read-only through the admin API; a declaration that would take away what the admin API made is
 * refused. Real gateways on 127.0.0.1 with the memory store.
 */
const appKey = 'app-key-0123456789abcdef0123456789';
const mobile = { id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f', name: 'Mobile app', apikey_development: appKey };
const mobileQuotaId = 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d';

const system = (messages: number) => ({
  id: systemQuotaId,
  type: 'API',
  name: 'System',
  restrictions: [throttle(messages, 1, 'hour')],
});
const mobileQuota = {
  id: mobileQuotaId,
  type: 'APPLICATION',
  name: 'Mobile',
  application: mobile.id,
  restrictions: [{ ...throttle(1, 1, 'hour'), api: petsApiId }],
};

const defer = cleanupAfterEach();

async function start(quotas: unknown[]): Promise<{ gateway: TestGateway; config: Record<string, unknown> }> {
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const config = petsConfig(`${upstream.url}/pets`, { applications: [mobile], quotas });
  const gateway = await startTestGateway(config);
  defer(() => gateway.close());
  return { gateway, config };
}

const get = (gateway: TestGateway) =>
  fetch(`${gateway.url}/pets/1`, { headers: { authorization: basicAuth(appKey) } }).then((res) => res.status);

describe('quotas declared in conf/', () => {
  it('are written into the store at start and enforced, an application quota as its own', async () => {
    const { gateway } = await start([system(10), mobileQuota]);
    expect(await get(gateway)).toBe(200);
    expect(await get(gateway)).toBe(429);
    const own = (await (await adminCall(gateway, 'GET', `/applications/${mobile.id}/quota`)).json()) as {
      id: string;
      application: unknown;
    };
    expect(own).toMatchObject({ id: mobileQuotaId, application: { id: mobile.id, name: 'Mobile app' } });
    expect(gateway.logs.filter((line) => line.msg === 'declared quota created')).toHaveLength(1);
  });

  it('keep the built-in description of a well-known quota that declares none, as the API does', async () => {
    const applicationDefault = { ...mobileQuota, id: applicationDefaultQuotaId, application: undefined };
    const other = { ...mobileQuota, id: mobileQuotaId, application: undefined, name: 'Plan' };
    const { gateway } = await start([system(10), { ...applicationDefault, description: '' }, other]);
    const description = async (id: string) =>
      ((await (await adminCall(gateway, 'GET', `/quotas/${id}`)).json()) as { description: string })
        .description;
    expect(await description(systemQuotaId)).toBe('Limits on all traffic, across every application');
    // One that says '' says so; a quota of its own has no built-in description.
    expect(await description(applicationDefaultQuotaId)).toBe('');
    expect(await description(mobileQuotaId)).toBe('');
  });

  it('are read-only through the admin API, which says where to change them', async () => {
    const { gateway } = await start([system(10), mobileQuota]);
    const put = await adminCall(gateway, 'PUT', `/quotas/${systemQuotaId}`, { ...system(99), id: undefined });
    expect(put.status).toBe(403);
    expect(await put.json()).toMatchObject({
      errors: [
        expect.objectContaining({
          message: `quota '${systemQuotaId}' is declared in conf/ (quotas[0]): change it there and reload (gateway reload)`,
        }),
      ],
    });
    expect((await adminCall(gateway, 'DELETE', `/applications/${mobile.id}/quota`)).status).toBe(403);
    expect(
      (await adminCall(gateway, 'PUT', `/applications/${mobile.id}/quota`, { restrictions: [] })).status,
    ).toBe(403);
    // Quotas the file does not declare stay the admin API's.
    expect(
      (await adminCall(gateway, 'POST', '/quotas', { type: 'API', name: 'Extra', restrictions: [] })).status,
    ).toBe(201);
    // Answers say which are declared (the console shows them read-only).
    const list = (await (await adminCall(gateway, 'GET', '/quotas')).json()) as Array<{
      name: string;
      declared?: boolean;
    }>;
    expect(list.map(({ name, declared }) => [name, declared ?? false]).sort()).toEqual(
      [
        ['Application Default', false],
        ['Extra', false],
        ['Mobile', true],
        ['System', true],
      ].sort(),
    );
    expect(await (await adminCall(gateway, 'GET', `/quotas/${systemQuotaId}`)).json()).toMatchObject({
      declared: true,
    });
  });

  it('change at a reload, which logs what the store held before', async () => {
    const { gateway, config } = await start([system(1)]);
    expect(await get(gateway)).toBe(200);
    expect(await get(gateway)).toBe(429);
    expect((await gateway.reloadWith({ ...config, quotas: [system(3)] })).applied).toBe(true);
    expect(await get(gateway)).toBe(200);
    // The start replaced the untouched System quota; the reload replaced the one of the start.
    const replaced = gateway.logs
      .filter((line) => line.msg === 'declared quota replaced what the store held')
      .at(-1);
    expect(replaced).toMatchObject({ quota: systemQuotaId, previous: { restrictions: [expect.anything()] } });
  });

  it('refuse a reload whose declaration would take away a quota the admin API made', async () => {
    const { gateway, config } = await start([]);
    const made = await adminCall(gateway, 'POST', `/applications/${mobile.id}/quota`, {
      restrictions: [throttle(7, 1, 'hour')],
    });
    expect(made.status).toBe(201);
    const { id } = (await made.json()) as { id: string };
    const outcome = await gateway.reloadWith({ ...config, quotas: [mobileQuota] });
    expect(outcome).toEqual({
      applied: false,
      problems: [
        `quotas: quota '${mobileQuotaId}': application '${mobile.id}' has another quota of its own ('${id}'); delete it, or declare it with its id`,
      ],
    });
    expect(
      ((await (await adminCall(gateway, 'GET', `/applications/${mobile.id}/quota`)).json()) as { id: string })
        .id,
    ).toBe(id);
  });

  it('carry shadow, throttleunits and concurrency restrictions as the API takes them, and enforce them', async () => {
    const { gateway } = await start([
      {
        ...system(1),
        restrictions: [
          { ...throttle(1, 1, 'hour'), mode: 'shadow' },
          {
            api: '*',
            method: '*',
            type: 'throttleunits',
            config: { units: 50, per: 1, period: 'hour', header: 'X-Tokens', default: 2 },
          },
          {
            api: '*',
            method: '*',
            type: 'throttleunits',
            config: { units: 500, per: 1, period: 'day', body: 'usage.total_tokens' },
          },
          { api: '*', method: '*', type: 'concurrency', config: { connections: 1 } },
        ],
      },
    ]);
    expect([await get(gateway), await get(gateway)]).toEqual([200, 200]);
    const stored = (await (await adminCall(gateway, 'GET', `/quotas/${systemQuotaId}`)).json()) as {
      restrictions: unknown[];
    };
    expect(stored.restrictions).toEqual([
      {
        api: '*',
        method: '*',
        type: 'throttle',
        mode: 'shadow',
        config: { messages: '1', per: '1', period: 'hour' },
      },
      {
        api: '*',
        method: '*',
        type: 'throttleunits',
        config: { units: '50', per: '1', period: 'hour', header: 'x-tokens', default: '2' },
      },
      {
        api: '*',
        method: '*',
        type: 'throttleunits',
        config: { units: '500', per: '1', period: 'day', body: 'usage.total_tokens' },
      },
      { api: '*', method: '*', type: 'concurrency', config: { connections: '1' } },
    ]);
  });

  it('take calendar windows, and say what is wrong with one', async () => {
    const monthly = (config: Record<string, unknown>) => ({
      ...system(1),
      restrictions: [{ api: '*', method: '*', type: 'throttle', config: { messages: 5, per: 1, ...config } }],
    });
    const good = writeConfigDir(
      petsConfig('http://127.0.0.1:9/pets', {
        quotas: [monthly({ period: 'month', window: 'calendar', timeZone: 'Pacific/Chatham', startDay: 3 })],
      }),
    );
    const loaded = await loadConfig({ configDir: good, env: {} });
    expect(loaded.config.quotas![0]!).toMatchObject({
      restrictions: [
        { config: { period: 'month', window: 'calendar', timeZone: 'Pacific/Chatham', startDay: 3 } },
      ],
    });
    const bad = writeConfigDir(
      petsConfig('http://127.0.0.1:9/pets', { quotas: [monthly({ period: 'year' })] }),
    );
    const problems = await loadConfig({ configDir: bad, env: {} }).then(
      () => [],
      (error: ConfigError) => error.problems.map((problem) => problem.replace(/^.*default\.mjs: /, '')),
    );
    expect(problems).toEqual([
      'quotas[0].restrictions[0].config.period: year is a calendar period: give window: calendar (a sliding year has no fixed length)',
    ]);
  });

  it('are checked with the config: catalog ids, applications, ids once, all at once', async () => {
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9/pets', {
        applications: [mobile],
        quotas: [
          {
            ...system(1),
            restrictions: [{ ...throttle(1, 1, 'hour'), api: '11111111-2b6a-4d38-9a1e-0c3f4b8d2a10' }],
          },
          { ...mobileQuota, application: 'ghost' },
          { ...mobileQuota, id: systemQuotaId, type: 'API', application: undefined, name: 'Again' },
        ],
      }),
    );
    const problems = await loadConfig({ configDir: dir, env: {} }).then(
      () => [],
      (error: ConfigError) => error.problems.map((problem) => problem.replace(/^.*default\.mjs: /, '')),
    );
    expect(problems).toEqual([
      'quotas[2].id: duplicate of quotas[0].id',
      "quotas[0].restrictions[0].api: no API of apis has id '11111111-2b6a-4d38-9a1e-0c3f4b8d2a10' (or use *); the APIs: '5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10' (Pet Store)",
      "quotas[1].application: no application of the config has id 'ghost'",
    ]);
  });
});

describe('a declared restriction that names a method the API lacks', () => {
  it('is told so with the ids as the file spells them, and the method it most likely means', async () => {
    const api = petsApiId.toUpperCase();
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9/pets', {
        quotas: [{ ...system(1), restrictions: [{ ...throttle(1, 1, 'hour'), api, method: 'GetPet' }] }],
      }),
    );
    const problems = await loadConfig({ configDir: dir, env: {} }).then(
      () => [],
      (error: ConfigError) => error.problems.map((problem) => problem.replace(/^.*default\.mjs: /, '')),
    );
    expect(problems).toEqual([
      `quotas[0].restrictions[0].method: API '${api}' has no method with id 'GetPet' (or use *); did you mean '${getPetMethodId}' (getPet)?`,
    ]);
  });
});
