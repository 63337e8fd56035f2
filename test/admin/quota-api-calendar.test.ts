import { describe, expect, it } from 'vitest';
import { getPetThrottle, quotaDto, useQuotaApiGateway } from '../helpers/quota-api-client.js';
import { adminUser, userAuth } from '../helpers/test-gateway.js';

/** The Quota API takes calendar windows on every type with a window: an extension of Axway's. */
describe.each(['memory', 'redis'] as const)('Quota API: calendar windows (%s store)', (storeType) => {
  const { call, errorsOf, adminUrl } = useQuotaApiGateway(storeType);

  it('stores window, timeZone and startDay, and answers them on v1.3 and v1.4', async () => {
    const restrictions = [
      getPetThrottle({
        config: {
          messages: 1000000,
          per: 1,
          period: 'month',
          window: 'calendar',
          timeZone: 'Europe/Berlin',
          startDay: 15,
        },
      }),
      getPetThrottle({ type: 'throttlemb', config: { mb: 5, per: 1, period: 'year', window: 'calendar' } }),
      getPetThrottle({
        type: 'throttleunits',
        config: {
          units: 7,
          per: 1,
          period: 'week',
          window: 'calendar',
          timeZone: 'Asia/Kolkata',
          header: 'x-cost',
        },
      }),
      getPetThrottle({ config: { messages: 9, per: 1, period: 'day', window: 'sliding' } }),
    ];
    const created = await call('POST', '/quotas', { body: quotaDto({ restrictions }) });
    expect(created.status).toBe(201);
    const id = (created.body as { id: string }).id;
    const configs = [
      {
        messages: '1000000',
        per: '1',
        period: 'month',
        window: 'calendar',
        timeZone: 'Europe/Berlin',
        startDay: 15,
      },
      { mb: '5', per: '1', period: 'year', window: 'calendar' },
      {
        units: '7',
        per: '1',
        period: 'week',
        window: 'calendar',
        timeZone: 'Asia/Kolkata',
        header: 'x-cost',
      },
      // Sliding is the default, answered as Axway's clients know the config: without it.
      { messages: '9', per: '1', period: 'day' },
    ];
    for (const version of ['v1.3', 'v1.4']) {
      const res = await fetch(`${adminUrl()}/api/portal/${version}/quotas/${id}`, {
        headers: { authorization: userAuth(adminUser) },
      });
      const { restrictions: answered } = (await res.json()) as { restrictions: Array<{ config: unknown }> };
      expect(answered.map((restriction) => restriction.config)).toEqual(configs);
    }
  });

  it.each([
    [
      'a sliding month',
      { messages: 1, per: 1, period: 'month' },
      'restrictions[0].config.period: month is a calendar period: give window: calendar (a sliding month has no fixed length)',
    ],
    [
      'a calendar window of 2 days',
      { messages: 1, per: 2, period: 'days', window: 'calendar' },
      'restrictions[0].config.per: must be 1 for a calendar window: it is one day, week, month or year of the calendar',
    ],
    [
      'an unknown time zone',
      { messages: 1, per: 1, period: 'day', window: 'calendar', timeZone: 'Europe/Atlantis' },
      'restrictions[0].config.timeZone: must be an IANA time zone (Europe/Berlin) or UTC',
    ],
    [
      'a billing day of 31',
      { messages: 1, per: 1, period: 'month', window: 'calendar', startDay: 31 },
      'restrictions[0].config.startDay: must be a whole number from 1 to 28',
    ],
    [
      'an unknown window',
      { messages: 1, per: 1, period: 'day', window: 'fixed' },
      'restrictions[0].config.window: must be one of sliding, calendar',
    ],
  ])('refuses %s, naming the field, and stores nothing', async (_case, config, message) => {
    const before = ((await call('GET', '/quotas')).body as unknown[]).length;
    const answer = await call('POST', '/quotas', {
      body: quotaDto({ restrictions: [getPetThrottle({ config })] }),
    });
    expect(answer.status).toBe(400);
    expect(errorsOf(answer)).toContainEqual({ code: 400, message });
    expect(((await call('GET', '/quotas')).body as unknown[]).length).toBe(before);
  });

  it('refuses a window on a concurrency restriction', async () => {
    const answer = await call('POST', '/quotas', {
      body: quotaDto({
        restrictions: [
          getPetThrottle({ type: 'concurrency', config: { connections: 2, window: 'calendar' } }),
        ],
      }),
    });
    expect(errorsOf(answer)).toContainEqual({
      code: 400,
      message: 'restrictions[0].config.window: not allowed for type concurrency',
    });
  });
});
