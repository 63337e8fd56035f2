import { describe, expect, it } from 'vitest';
import type { ConfigError } from '../../src/kit/config-error.js';
import { loadConfig } from '../../src/config/load-config.js';
import {
  adminCall,
  basicAuth,
  petsConfig,
  startTestGateway,
  throttle,
  writeConfigDir,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * Plans declared in conf/: a plan among `quotas`, applications put on it by `applications[].plan` or by
 * a membership in `quotas`; written into the store at start and at each reload, read-only through the
 * admin API. Real gateways on 127.0.0.1 with the memory store.
 */
const mobileKey = 'app-key-0123456789abcdef0123456789';
const webKey = 'web-key-0123456789abcdef0123456789';
const goldId = '6c0b4f2e-1d3a-4b5c-9e8f-7a6b5c4d3e2f';
const apiQuotaId = '2f3e4d5c-6b7a-4988-8776-655443322110';
const webMembershipId = '9e8d7c6b-5a49-4838-9726-150413029181';
const mobile = { id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f', name: 'Mobile', apikey_development: mobileKey };
const web = { id: '5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a', name: 'Web', apikey_development: webKey };
const gold = (messages: number) => ({
  id: goldId,
  type: 'APPLICATION',
  name: 'Gold',
  restrictions: [throttle(messages, 1, 'hour')],
});

const defer = cleanupAfterEach();

function plansConfig(upstream: string, messages: number): Record<string, unknown> {
  return petsConfig(upstream, {
    applications: [{ ...mobile, plan: goldId.toUpperCase() }, web],
    quotas: [gold(messages), { id: webMembershipId, application: web.id, plan: goldId }],
  });
}

async function start(): Promise<{ gateway: TestGateway; config: Record<string, unknown> }> {
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const config = plansConfig(`${upstream.url}/pets`, 1);
  const gateway = await startTestGateway(config);
  defer(() => gateway.close());
  return { gateway, config };
}

const get = (gateway: TestGateway, key: string) =>
  fetch(`${gateway.url}/pets/1`, { headers: { authorization: basicAuth(key) } }).then((res) => res.status);

const configProblems = (config: Record<string, unknown>) =>
  loadConfig({ configDir: writeConfigDir(config), env: {} }).then(
    () => [],
    (error: ConfigError) => error.problems.map((problem) => problem.replace(/^.*default\.mjs: /, '')),
  );

describe('plans declared in conf/', () => {
  it('put applications on a plan at start, each counted on its own, and follow the plan at a reload', async () => {
    const { gateway, config } = await start();
    expect([await get(gateway, mobileKey), await get(gateway, mobileKey)]).toEqual([200, 429]);
    expect([await get(gateway, webKey), await get(gateway, webKey)]).toEqual([200, 429]);
    const quota = await (await adminCall(gateway, 'GET', `/applications/${mobile.id}/quota`)).json();
    expect(quota).toMatchObject({ id: goldId, plan: { id: goldId, name: 'Gold' } });
    expect(await (await adminCall(gateway, 'GET', `/quotas/${goldId}`)).json()).toMatchObject({
      applicationCount: 2,
      declared: true,
    });

    const reloaded = await gateway.reloadWith({
      ...config,
      quotas: [gold(2), (config.quotas as unknown[])[1]],
    });
    expect(reloaded.applied).toBe(true);
    expect(await get(gateway, mobileKey)).toBe(200);
    expect(await get(gateway, webKey)).toBe(200);
    expect(await get(gateway, webKey)).toBe(429);
  });

  it('move applications off a plan and retype it in one reload, and refuse whole a reload that leaves one on it', async () => {
    const { gateway, config } = await start();
    const silverId = '7e6d5c4b-3a29-4817-9605-f4e3d2c1b0a9';
    const silver = { ...gold(5), id: silverId, name: 'Silver' };
    const [, webMembership] = config.quotas as Array<Record<string, unknown>>;
    const withSilver = { ...config, quotas: [...(config.quotas as unknown[]), silver] };
    expect(await gateway.reloadWith(withSilver)).toMatchObject({ applied: true });

    const moved = {
      ...config,
      applications: [{ ...mobile, plan: silverId }, web],
      quotas: [{ ...gold(1), type: 'API' }, { ...webMembership, plan: silverId }, silver],
    };
    expect(await gateway.reloadWith(moved)).toMatchObject({ applied: true });
    expect(await (await adminCall(gateway, 'GET', `/quotas/${goldId}`)).json()).toMatchObject({
      type: 'API',
    });
    for (const application of [mobile, web])
      expect(
        await (await adminCall(gateway, 'GET', `/applications/${application.id}/quota`)).json(),
      ).toMatchObject({ plan: { id: silverId } });

    // The project is put on Silver through the API; Mobile and Web stay on it when conf/ lets them go.
    expect((await adminCall(gateway, 'PUT', '/applications/project/quota', { plan: silverId })).status).toBe(
      200,
    );
    const refused = await gateway.reloadWith({
      ...moved,
      applications: [mobile, web],
      quotas: [
        { ...gold(1), type: 'API', name: 'Renamed' },
        { ...silver, type: 'API' },
      ],
    });
    expect(refused).toMatchObject({
      applied: false,
      problems: [
        `quotas: quota '${silverId}' is a plan that 3 applications are on ('${mobile.id}', '${web.id}', 'project'); take each off it first with DELETE /applications/{id}/quota (an application gone from conf/ or from the directory too), or put it on another plan`,
      ],
    });
    expect(await (await adminCall(gateway, 'GET', `/quotas/${goldId}`)).json()).toMatchObject({
      name: 'Gold',
    });
  });

  it('are read-only through the admin API, which says where to change them', async () => {
    const { gateway } = await start();
    const mobileAnswer = await adminCall(gateway, 'DELETE', `/applications/${mobile.id}/quota`);
    expect(mobileAnswer.status).toBe(403);
    expect(await mobileAnswer.json()).toMatchObject({
      errors: [
        expect.objectContaining({
          message: `application '${mobile.id}' is put on a plan in conf/ (applications[0].plan): change it there and reload`,
        }),
      ],
    });
    const webAnswer = await adminCall(gateway, 'PUT', `/applications/${web.id}/quota`, { restrictions: [] });
    expect(webAnswer.status).toBe(403);
    expect((await adminCall(gateway, 'DELETE', `/quotas/${goldId}`)).status).toBe(403);
  });

  it('are checked with the config: a plan that is none, a membership with restrictions or without an application, an application on a plan and with a quota', async () => {
    const problems = await configProblems(
      petsConfig('http://127.0.0.1:9/pets', {
        applications: [
          { ...mobile, plan: apiQuotaId },
          { ...web, plan: goldId },
        ],
        quotas: [
          gold(1),
          { id: apiQuotaId, type: 'API', name: 'Per API', restrictions: [] },
          { id: webMembershipId, application: 'project', plan: goldId, restrictions: [] },
          { id: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', plan: goldId },
          { id: '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d', application: web.id, plan: apiQuotaId },
        ],
      }),
    );
    expect(problems).toEqual([
      "quotas[2].restrictions: must be left out with a plan: the plan's is used",
      'quotas[3].application: is required with a plan',
      `applications[0].plan: quota '${apiQuotaId}' is of type API, not a plan`,
      'applications[1].plan: the application already has a quota at quotas[4]',
      `quotas[4].plan: quota '${apiQuotaId}' is of type API, not a plan`,
    ]);
  });
});
