import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get, mobileId, mobileKey } from '../helpers/enforcement-gateways.js';
import { FakeClock } from '../helpers/fake-clock.js';
import {
  adminUser,
  devKey,
  memberUser,
  petsApiId,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import {
  costingUpstream,
  historyAnswer,
  historyDay,
  historyNoon,
  historyRows,
  setHistoryQuota,
} from '../helpers/usage-history.js';

/**
 * The usage history's routes: one application's lines (admins and members), every application's
 * (admins), narrowed by API; a range of days checked with clear 400s; both in the OpenAPI document.
 */
const defer = cleanupAfterEach();

async function gatewayWithHistory(): Promise<TestGateway> {
  const upstream = await startUpstream(costingUpstream);
  defer(() => upstream.close());
  const clock = new FakeClock(historyNoon);
  const applications = [{ id: mobileId, name: 'Mobile', apikey_development: mobileKey }];
  const gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, { applications, usageHistory: { days: 30 } }),
    {},
    { clock: clock.now, timers: clock },
  );
  defer(() => gateway.close());
  await setHistoryQuota(gateway, 10);
  await get(gateway, devKey, '/pets/1');
  await get(gateway, mobileKey, '/pets/2');
  await clock.advance(1_000);
  await expect.poll(async () => (await historyRows(gateway)).length).toBe(2);
  return gateway;
}

const range = `from=${historyDay}&to=${historyDay}`;

describe('the usage history routes', () => {
  it("answer one application's lines to a member, and every application's to an admin only", async () => {
    const gateway = await gatewayWithHistory();
    const own = await historyAnswer(gateway, `/applications/${mobileId}/usage/history?${range}`, memberUser);
    expect(own).toEqual({
      status: 200,
      body: [expect.objectContaining({ application: mobileId, api: petsApiId, admitted: 1, units: 2 })],
    });
    expect(await historyAnswer(gateway, `/usage/history?${range}`, memberUser)).toEqual({
      status: 403,
      body: expect.objectContaining({
        errors: [expect.objectContaining({ message: expect.stringContaining('API Administrator') })],
      }),
    });
    const all = await historyAnswer(gateway, `/usage/history?${range}&api=${petsApiId}`, adminUser);
    expect((all.body as Array<{ application: string }>).map((row) => row.application)).toEqual([
      mobileId,
      'project',
    ]);
    expect(await historyAnswer(gateway, `/usage/history?${range}&api=another`)).toEqual({
      status: 200,
      body: [],
    });
  });

  it.each([
    ['from=2026-11-30&to=2026-11-29', 'from: 2026-11-30 is later than to (2026-11-29)'],
    ['from=2026-10-01&to=2026-11-30', 'to: 61 days asked, but the history keeps 30 (usageHistory.days)'],
    ['from=2026-11-31&to=2026-12-01', 'must be a date as YYYY-MM-DD'],
    ['from=2026-11-01', 'to'],
  ])('refuse the range %s with a 400 that says why', async (query, message) => {
    const gateway = await gatewayWithHistory();
    for (const path of [`/usage/history?${query}`, `/applications/${mobileId}/usage/history?${query}`]) {
      const { status, body } = await historyAnswer(gateway, path);
      expect(status).toBe(400);
      expect(JSON.stringify(body)).toContain(message);
    }
  });

  it('are in the OpenAPI document, with their query', async () => {
    const gateway = await gatewayWithHistory();
    const { body } = await historyAnswer(gateway, '/openapi.json');
    const paths = (body as { paths: Record<string, { get?: { parameters?: Array<{ name: string }> } }> })
      .paths;
    const names = (route: string) => paths[route]?.get?.parameters?.map((parameter) => parameter.name).sort();
    expect(names('/api/portal/v1.3/usage/history')).toEqual(['api', 'from', 'to']);
    expect(names('/api/portal/v1.3/applications/{id}/usage/history')).toEqual(['from', 'id', 'to']);
  });
});
