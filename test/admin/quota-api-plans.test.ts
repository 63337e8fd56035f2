import { describe, expect, it } from 'vitest';
import { getPetThrottle, mobileAppId, quotaDto, useQuotaApiGateway } from '../helpers/quota-api-client.js';
import { applicationDefaultQuotaId, memberUser, systemQuotaId } from '../helpers/test-gateway.js';

describe.each(['memory', 'redis'] as const)('Quota API: plans (%s store)', (storeType) => {
  const { call, errorsOf } = useQuotaApiGateway(storeType);
  const onPlan = (application: string) => `/applications/${application}/quota`;
  const newPlan = async (name: string) => {
    const created = await call('POST', '/quotas', { body: quotaDto({ type: 'APPLICATION', name }) });
    expect(created.status).toBe(201);
    return created.body as { id: string; applicationCount: number };
  };

  it('puts an application on a plan, answers the plan with the plan named, counts it on the plan, and takes it off', async () => {
    const gold = await newPlan('Gold');
    expect(gold.applicationCount).toBe(0);

    const put = await call('PUT', onPlan(mobileAppId), { body: { plan: gold.id.toUpperCase() } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({
      id: gold.id,
      type: 'APPLICATION',
      name: 'Gold',
      restrictions: [getPetThrottle({ config: { messages: '10', per: '1', period: 'seconds' } })],
      plan: { id: gold.id, name: 'Gold' },
    });
    const read = await call('GET', onPlan(mobileAppId));
    expect(read.body).toEqual(put.body);
    expect(read.headers.get('etag')).toBe(put.headers.get('etag'));

    const listed = (await call('GET', '/quotas')).body as Array<{ id: string; applicationCount?: number }>;
    expect(listed.find((quota) => quota.id === gold.id)?.applicationCount).toBe(1);
    // The record that puts the application on the plan is no quota of the list.
    expect(listed.filter((quota) => quota.id !== gold.id && 'plan' in quota)).toEqual([]);
    expect(listed.find((quota) => quota.id === applicationDefaultQuotaId)).not.toHaveProperty(
      'applicationCount',
    );
    expect(listed.find((quota) => quota.id === systemQuotaId)).not.toHaveProperty('applicationCount');
    expect((await call('GET', `/quotas/${gold.id}`)).body).toMatchObject({ applicationCount: 1 });

    // A change of the plan is a change of what the application answers, and of its ETag.
    const renamed = await call('PUT', `/quotas/${gold.id}`, {
      body: quotaDto({ type: 'APPLICATION', name: 'Gold v2' }),
    });
    expect(renamed.status).toBe(200);
    const after = await call('GET', onPlan(mobileAppId));
    expect(after.body).toMatchObject({ name: 'Gold v2', plan: { id: gold.id, name: 'Gold v2' } });
    expect(after.headers.get('etag')).not.toBe(read.headers.get('etag'));
    const stale = await call('DELETE', onPlan(mobileAppId), {
      headers: { 'if-match': read.headers.get('etag')! },
    });
    expect(stale.status).toBe(412);

    const off = await call('DELETE', onPlan(mobileAppId), {
      headers: { 'if-match': after.headers.get('etag')! },
    });
    expect(off.status).toBe(204);
    expect((await call('GET', onPlan(mobileAppId))).body).toMatchObject({ id: applicationDefaultQuotaId });
    expect((await call('GET', `/quotas/${gold.id}`)).body).toMatchObject({ applicationCount: 0 });
    expect((await call('DELETE', `/quotas/${gold.id}`)).status).toBe(204);
  });

  it('moves an application between its own quota and plans with PUT, one record at a time', async () => {
    const [gold, silver] = [await newPlan('Gold'), await newPlan('Silver')];
    expect((await call('PUT', onPlan(mobileAppId), { body: { plan: gold.id } })).status).toBe(200);
    expect((await call('PUT', onPlan(mobileAppId), { body: { plan: silver.id } })).body).toMatchObject({
      plan: { id: silver.id },
    });
    const own = await call('PUT', onPlan(mobileAppId), {
      body: quotaDto({ type: 'APPLICATION', name: 'Own' }),
    });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ name: 'Own', application: { id: mobileAppId } });
    expect(own.body).not.toHaveProperty('plan');
    expect((await call('GET', `/quotas/${silver.id}`)).body).toMatchObject({ applicationCount: 0 });
    expect((await call('PUT', onPlan(mobileAppId), { body: { plan: gold.id } })).status).toBe(200);
    // The application's own quota is gone: its id is no quota any more.
    expect((await call('GET', `/quotas/${(own.body as { id: string }).id}`)).status).toBe(404);
    expect((await call('DELETE', onPlan(mobileAppId))).status).toBe(204);
  });

  it('refuses a plan that is none (400), a body with both a plan and restrictions (400), and a member (403)', async () => {
    const api = (await call('POST', '/quotas', { body: quotaDto() })).body as { id: string };
    const owned = await call('PUT', '/applications/project/quota', {
      body: quotaDto({ type: 'APPLICATION' }),
    });
    const cases: Array<[unknown, string]> = [
      [{ plan: api.id }, `plan: quota '${api.id}' is of type API, not a plan`],
      [
        { plan: applicationDefaultQuotaId },
        `plan: quota '${applicationDefaultQuotaId}' is a well-known quota, not a plan`,
      ],
      [
        { plan: (owned.body as { id: string }).id },
        `plan: quota '${(owned.body as { id: string }).id}' is the own quota of application 'project', not a plan`,
      ],
      [
        { plan: '11111111-2222-4333-8444-555555555555' },
        "plan: no quota with id '11111111-2222-4333-8444-555555555555'",
      ],
      [{ plan: 'gold' }, 'plan: must be the id (a UUID) of a plan'],
      [{}, 'restrictions: is required (or give a plan)'],
    ];
    for (const [body, message] of cases) {
      const answer = await call('PUT', onPlan(mobileAppId), { body });
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(errorsOf(answer).map((error) => error.message)).toContain(message);
    }
    const gold = await newPlan('Gold');
    const both = await call('PUT', onPlan(mobileAppId), {
      body: { plan: gold.id, restrictions: [getPetThrottle()] },
    });
    expect(errorsOf(both)[0]!.message).toBe(
      "restrictions: must be left out with a plan: an application on a plan has the plan's restrictions",
    );
    expect((await call('GET', onPlan(mobileAppId))).body).toMatchObject({ id: applicationDefaultQuotaId });
    const member = await call('PUT', onPlan(mobileAppId), { body: { plan: gold.id }, user: memberUser });
    expect(member.status).toBe(403);
    expect((await call('DELETE', '/applications/project/quota')).status).toBe(204);
  });

  it('refuses to delete a plan applications are on (409, naming how many), or to make it an API quota', async () => {
    const gold = await newPlan('Gold');
    await call('PUT', onPlan(mobileAppId), { body: { plan: gold.id } });
    await call('PUT', onPlan('project'), { body: { plan: gold.id } });
    const deleted = await call('DELETE', `/quotas/${gold.id}`);
    expect(deleted.status).toBe(409);
    expect(errorsOf(deleted)[0]!.message).toMatch(`quota '${gold.id}' is a plan that 2 applications are on`);
    const retyped = await call('PUT', `/quotas/${gold.id}`, { body: quotaDto({ type: 'API' }) });
    expect(retyped.status).toBe(409);
    expect((await call('GET', `/quotas/${gold.id}`)).body).toMatchObject({
      type: 'APPLICATION',
      applicationCount: 2,
    });
    await call('DELETE', onPlan(mobileAppId));
    await call('DELETE', onPlan('project'));
    expect((await call('DELETE', `/quotas/${gold.id}`)).status).toBe(204);
  });
});
