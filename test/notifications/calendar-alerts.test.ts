import { afterEach, describe, expect, it } from 'vitest';
import { get, mobileKey, useEnforcementGateways } from '../helpers/enforcement-gateways.js';
import { applicationDefaultQuotaId } from '../helpers/test-gateway.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const secret = 'alerts-secret-0123456789abcdef';
const at = (iso: string): number => Date.parse(iso);

const receivers: WebhookReceiver[] = [];
afterEach(async () => {
  for (const receiver of receivers.splice(0)) await receiver.close();
});

describe('threshold alerts of a calendar window', () => {
  const suite = useEnforcementGateways();

  it("are sent once per threshold per calendar month, however the month's calls are spread, and name its end", async () => {
    const hook = await startWebhookReceiver(secret);
    receivers.push(hook);
    suite.clock.now = at('2026-11-30T20:00:00Z');
    const gateway = await suite.gatewayWith({
      quotas: [
        {
          id: applicationDefaultQuotaId,
          type: 'APPLICATION',
          name: 'Application Default',
          restrictions: [
            {
              api: '*',
              method: '*',
              type: 'throttle',
              config: { messages: 10, per: 1, period: 'month', window: 'calendar' },
            },
          ],
        },
      ],
      notifications: { webhooks: [{ url: hook.url, secret, thresholds: [80, 100] }] },
    });
    // 12 calls, 17 minutes apart: a sliding window's end would move with each of them.
    const statuses: number[] = [];
    for (let call = 0; call < 12; call += 1) {
      statuses.push((await get(gateway, mobileKey)).status);
      suite.clock.now += 17 * 60_000;
    }
    expect(statuses).toEqual([...Array<number>(10).fill(200), 429, 429]);
    await expect.poll(() => hook.delivered.length).toBe(2);
    expect(hook.delivered.map((received) => received.event.data)).toEqual([
      expect.objectContaining({ threshold: 80, used: 8, windowEnd: '2026-12-01T00:00:00.000Z' }),
      expect.objectContaining({ threshold: 100, used: 10, windowEnd: '2026-12-01T00:00:00.000Z' }),
    ]);
    suite.clock.now = at('2026-12-01T00:00:00Z');
    for (let call = 0; call < 10; call += 1) expect((await get(gateway, mobileKey)).status).toBe(200);
    await expect.poll(() => hook.delivered.length).toBe(4);
    expect(hook.delivered.slice(2).map((received) => received.event.data.windowEnd)).toEqual([
      '2027-01-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ]);
  });
});
