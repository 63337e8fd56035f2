import { describe, expect, it } from 'vitest';
import type { RawResponse } from '../helpers/raw-http.js';
import { eachStore, get, post, useEnforcementGateways } from '../helpers/enforcement-gateways.js';
import { mb, setQuota, systemQuotaId, throttle } from '../helpers/test-gateway.js';

/**
 * The RateLimit fields against Retry-After, on the gateway's clock (which drives the memory store and
 * the Redis script alike): a client that waits the `t` of a refusal must not come back early.
 */

const { clock, gatewayWith } = useEnforcementGateways();

/** The `r` and `t` of the RateLimit item of restriction `index` of the System quota. */
function item(answer: RawResponse, index = 0): { r: number; t: number } {
  const found = new RegExp(`"${systemQuotaId}/${index}";r=(\\d+);t=(\\d+)`).exec(
    String(answer.headers.ratelimit),
  );
  expect(found, String(answer.headers.ratelimit)).not.toBeNull();
  return { r: Number(found![1]), t: Number(found![2]) };
}

const retryAfter = (answer: RawResponse) => Number(answer.headers['retry-after']);

/** Moves the gateway's clock to the start of the next window of `windowMs` (and so of a sub-bucket). */
const startOfWindow = (windowMs: number) => (clock.now = Math.ceil((clock.now + 1) / windowMs) * windowMs);

describe.each(eachStore)('the RateLimit fields on %s', (_store, store) => {
  it.each([
    // A counter keeps its units until their sub-bucket (1/100 of the window) has left the window.
    [1, 'second', 2, 1_000],
    [10, 'seconds', 11, 10_000],
    [1, 'minute', 61, 60_000],
    [1, 'hour', 3636, 3_600_000],
    [1, 'week', 610_848, 604_800_000],
  ])(
    'say on a burst at the start of a %s-%s window t = Retry-After = %i s, the exact wait: a second early is refused, on time is admitted',
    async (per, period, wait, windowMs) => {
      const gateway = await gatewayWith(store());
      await setQuota(
        gateway,
        { type: 'API', name: 'System', restrictions: [throttle(3, per, period)] },
        systemQuotaId,
      );
      startOfWindow(windowMs);
      const burst: RawResponse[] = [];
      for (let i = 0; i < 5; i += 1) burst.push(await get(gateway));
      expect(burst.map((answer) => answer.status)).toEqual([200, 200, 200, 429, 429]);
      expect(burst.map((answer) => item(answer))).toEqual([
        { r: 2, t: wait },
        { r: 1, t: wait },
        { r: 0, t: wait },
        { r: 0, t: wait },
        { r: 0, t: wait },
      ]);
      expect(burst.slice(3).map(retryAfter)).toEqual([wait, wait]);

      clock.now += (wait - 1) * 1000;
      const early = await get(gateway);
      expect(early.status).toBe(429);
      expect([item(early).t, retryAfter(early)]).toEqual([1, 1]);
      clock.now += 1000;
      expect((await get(gateway)).status).toBe(200);
    },
  );

  it('say on every 429 of a client held at its limit t = Retry-After, counting down as the window slides', async () => {
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'minute')] },
      systemQuotaId,
    );
    // Into a sub-bucket of 600 ms, as a client would be: the first units stay counted 60.583 s.
    clock.now = Math.ceil(clock.now / 600) * 600 + 17;
    const answers: RawResponse[] = [];
    for (let i = 0; i < 8; i += 1) {
      answers.push(await get(gateway));
      clock.now += 1_000;
    }
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 429, 429, 429, 429, 429]);
    expect(answers.map((answer) => item(answer).t)).toEqual([61, 60, 59, 58, 57, 56, 55, 54]);
    for (const refused of answers.slice(3)) expect(retryAfter(refused)).toBe(item(refused).t);
  });

  it('say, when two restrictions refuse, the wait of each, and Retry-After is the longer one', async () => {
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      {
        type: 'API',
        name: 'System',
        restrictions: [throttle(2, 10, 'seconds'), throttle(2, 1, 'minute')],
      },
      systemQuotaId,
    );
    startOfWindow(60_000);
    expect([(await get(gateway)).status, (await get(gateway)).status]).toEqual([200, 200]);
    const refused = await get(gateway);
    expect(refused.status).toBe(429);
    expect([item(refused, 0).t, item(refused, 1).t, retryAfter(refused)]).toEqual([11, 61, 61]);
    // Once the 10-second one has room, the minute's refusal says what is left of its wait.
    clock.now += 11_000;
    const later = await get(gateway);
    expect(later.status).toBe(429);
    expect([item(later, 1).t, retryAfter(later)]).toEqual([50, 50]);
  });

  it('say on the 429 of a body that needs more than the oldest units to leave the wait until it fits, as Retry-After does', async () => {
    const gateway = await gatewayWith(store());
    // 1 MB a minute, 1,048,576 bytes.
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(1, 1, 'minute')] },
      systemQuotaId,
    );
    const start = startOfWindow(60_000);
    // A small answer first (under 2 KB), then 400,000 bytes echoed back 30 s later (over 800,000).
    expect((await get(gateway)).status).toBe(200);
    clock.now = start + 30_000;
    expect((await post(gateway, 400_000)).status).toBe(200);
    // 250,000 more fit only once the 30-second units leave, not the first ones: at 90.6 s, 59.6 s on.
    clock.now = start + 31_000;
    const refused = await post(gateway, 250_000);
    expect(refused.status).toBe(429);
    expect([item(refused).t, retryAfter(refused)]).toEqual([60, 60]);
  });
});
