import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get, mobileId, mobileKey, startFleetOfTwo } from '../helpers/enforcement-gateways.js';
import { FakeClock } from '../helpers/fake-clock.js';
import {
  accessLines,
  adminUser,
  getPetMethodId,
  petsApiId,
  systemQuotaId,
  userAuth,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import {
  costingUpstream,
  historyDay,
  historyNoon,
  historyOfAccessLines,
  historyRows,
  setHistoryQuota,
} from '../helpers/usage-history.js';

/**
 * Two gateways on one Redis count one application's calls into one line of the usage history: each
 * flushes its own counts with HINCRBY, and the line is their sum.
 */
const defer = cleanupAfterEach();

describe('the usage history of a fleet of two', () => {
  it("sums both gateways' counts into one line per application, API, method and day", async () => {
    const upstream = await startUpstream(costingUpstream);
    defer(() => upstream.close());
    const clock = new FakeClock(historyNoon);
    const clocks = { clock: clock.now, timers: clock };
    const [a, b] = await startFleetOfTwo(defer, {}, { upstream, clocks: [clocks, clocks] });
    await setHistoryQuota(a, 5);
    // b has the quota from Redis before any request goes through it.
    await expect
      .poll(async () => {
        const res = await fetch(`${b.adminUrl}/api/portal/v1.3/quotas/${systemQuotaId}`, {
          headers: { authorization: userAuth(adminUser) },
        });
        return ((await res.json()) as { restrictions: unknown[] }).restrictions.length;
      })
      .toBe(2);
    const statuses = [];
    for (const gateway of [a, b, a, b, a, b])
      statuses.push((await get(gateway, mobileKey, '/pets/10')).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    await clock.advance(1_000);
    const lines = [...accessLines(a), ...accessLines(b)];
    const expected = historyOfAccessLines(lines, (line) => Number(/\/(\d+)$/.exec(String(line.path))?.[1]));
    expect(expected).toEqual([
      expect.objectContaining({
        date: historyDay,
        application: mobileId,
        api: petsApiId,
        method: getPetMethodId,
        admitted: 5,
        refused: 1,
        units: 50,
      }),
    ]);
    await expect.poll(() => historyRows(a)).toEqual(expected);
    expect(await historyRows(b)).toEqual(expected);
  });
});
