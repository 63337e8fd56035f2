import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore, get, mobileId, mobileKey } from '../helpers/enforcement-gateways.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { request } from '../helpers/raw-http.js';
import { useTempDirs } from '../helpers/temp-dirs.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import {
  costingUpstream,
  historyNoon,
  historyOfAccessLines,
  historyRows,
  setHistoryQuota,
} from '../helpers/usage-history.js';

/**
 * The usage history counts what the access lines say, request for request: admitted (forwarded) and
 * refused (429) calls, their bytes, and the units their answers said, per application, API, method and
 * day; nothing for a request refused before its quota check. Written once a second (the flush's timer
 * is the test's clock), on close, and kept across a restart.
 */
const defer = cleanupAfterEach();
const dirs = useTempDirs('quotagate-history-');

/** What the upstream said in `X-Tokens`: the last segment of the path, when it is a number (else none). */
const unitsOf = (line: Record<string, unknown>) => Number(/\/(\d+)$/.exec(String(line.path))?.[1] ?? 0);

describe.each(eachStore)('the usage history on %s', (_name, store) => {
  /** A pets gateway on `clock` over the costing upstream; its API public (`auth: none`) when asked. */
  async function gatewayOn(
    overrides: Record<string, unknown>,
    clock: FakeClock,
    { isPublic = false } = {},
  ): Promise<TestGateway> {
    const upstream = await startUpstream(costingUpstream);
    defer(() => upstream.close());
    const applications = [{ id: mobileId, name: 'Mobile', apikey_development: mobileKey }];
    const config = petsConfig(`${upstream.url}/pets`, { applications, ...overrides });
    if (isPublic)
      config.apis = (config.apis as Array<Record<string, unknown>>).map((api) => ({ ...api, auth: 'none' }));
    const gateway = await startTestGateway(config, {}, { clock: clock.now, timers: clock });
    defer(() => gateway.close());
    return gateway;
  }

  /** The store's overrides, with a memory store's files in a folder that outlives one gateway. */
  const lastingStore = () => {
    const overrides = store();
    return 'store' in overrides
      ? overrides
      : { store: { type: 'memory', file: path.join(dirs.make(), 'quotas.json') } };
  };

  it('holds the counts of the access lines, written once a second, and nothing for a 401 or a 404', async () => {
    const clock = new FakeClock(historyNoon);
    const gateway = await gatewayOn(store(), clock);
    await setHistoryQuota(gateway, 4);
    const statuses = [
      (await get(gateway, devKey, '/pets/3')).status,
      (await get(gateway, mobileKey, '/pets/5')).status,
      (await get(gateway, devKey, '/pets/3')).status,
      (await get(gateway, mobileKey, '/pets/7')).status,
      (await get(gateway, devKey, '/pets/1')).status,
      (await get(gateway, mobileKey, '/pets/1')).status,
      (await get(gateway, 'not-a-key-0123456789abcdef0123456', '/pets/1')).status,
      (
        await request(gateway.url, {
          path: '/nowhere',
          headers: { authorization: basicAuth(devKey) },
        })
      ).status,
    ];
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429, 401, 404]);
    // Nothing is written before the flush's second has passed.
    await clock.advance(999);
    expect(await historyRows(gateway)).toEqual([]);
    await clock.advance(1);
    const expected = historyOfAccessLines(accessLines(gateway), unitsOf);
    await expect.poll(() => historyRows(gateway)).toEqual(expected);
    expect(expected.map((row) => [row.admitted, row.refused, row.units])).toEqual([
      [2, 1, 12],
      [2, 1, 6],
    ]);
    expect(expected.every((row) => row.bytesOut > 0)).toBe(true);
  });

  it('counts the bytes of a request body, and keeps every count across a restart', async () => {
    const clock = new FakeClock(historyNoon);
    const overrides = lastingStore();
    const first = await gatewayOn(overrides, clock);
    await setHistoryQuota(first, 3);
    for (let i = 0; i < 4; i += 1)
      await request(first.url, {
        method: 'POST',
        path: '/pets',
        headers: { authorization: basicAuth(devKey), 'content-length': '11' },
        body: 'hello world',
      });
    // Closed before its flush's second: the close writes what it holds.
    const linesBefore = accessLines(first);
    await first.close();

    const second = await gatewayOn(overrides, clock);
    expect((await get(second, devKey, '/pets/32')).status).toBeOneOf([200, 429]);
    await clock.advance(1_000);
    const expected = historyOfAccessLines([...linesBefore, ...accessLines(second)], unitsOf);
    await expect.poll(() => historyRows(second)).toEqual(expected);
    // getPet after the restart (admitted or refused: the counters may have outlived it), then addPet: 3
    // admitted with 11 bytes each, the 4th refused (its body is not read).
    expect(expected.map((row) => [row.admitted + row.refused, row.bytesIn])).toEqual([
      [1, 0],
      [4, 33],
    ]);
    expect(expected[1]!.refused).toBe(1);
  });

  it('counts the callers of a public API under no application', async () => {
    const clock = new FakeClock(historyNoon);
    const gateway = await gatewayOn(store(), clock, { isPublic: true });
    expect((await request(gateway.url, { path: '/pets/4' })).status).toBe(200);
    await clock.advance(1_000);
    await expect
      .poll(async () => (await historyRows(gateway)).map((row) => [row.application, row.admitted, row.units]))
      .toEqual([[null, 1, 0]]);
  });
});
