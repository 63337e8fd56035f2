import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore, get, startFleetOfTwo } from '../helpers/enforcement-gateways.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import {
  accessLines,
  basicAuth,
  concurrency,
  devKey,
  getPetMethodId,
  mb,
  petsApiId,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import {
  closed,
  echo,
  handshake,
  mustOpen,
  mustRefuse,
  rawWebSocket,
  startWebSocketUpstream,
  wsUrl,
} from '../helpers/websockets.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

const defer = cleanupAfterEach();
const upstream = useSuiteUpstream(() => startWebSocketUpstream());

const withKey = { authorization: basicAuth(devKey) };
/** mb(0.01): 10,485 bytes a minute. */
const limit = 10_485;
const kilobyte = 'k'.repeat(1_000);

/** The bytes the next request of the System quota may still move, as its RateLimit field says. */
async function remaining(gateway: TestGateway): Promise<number> {
  const answer = await get(gateway);
  return Number(/;r=(\d+);/.exec(String(answer.headers.ratelimit))?.[1]);
}

describe.each(eachStore)('WebSocket bytes against throttlemb, on %s', (_name, store) => {
  const clock = { now: 1_800_000_000_000 };
  async function gatewayWithTimers(): Promise<{ gateway: TestGateway; timers: FakeTimers }> {
    const timers = new FakeTimers();
    const gateway = await startTestGateway(
      petsConfig(upstream().url, store()),
      {},
      {
        clock: () => clock.now,
        timers,
      },
    );
    defer(() => gateway.close());
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.01, 1, 'minute')] },
      systemQuotaId,
    );
    return { gateway, timers };
  }

  it('charges the frame bytes of both directions once a second while the connection is open', async () => {
    const { gateway, timers } = await gatewayWithTimers();
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    for (let i = 0; i < 3; i += 1) await echo(ws, kilobyte);
    expect(await remaining(gateway)).toBeGreaterThan(limit - 100);
    timers.advance(1_000);
    // 3 × 1,000 bytes each way, with their frame heads (and the client's masks).
    await expect.poll(() => remaining(gateway)).toBeLessThan(limit - 6_000);
    expect(await echo(ws, 'still open')).toBe('still open');
    ws.close();
  });

  it('ends the connection with close code 1008 to both sides as the frame that fills a byte restriction passes', async () => {
    // Its timers are never moved: the tick never runs.
    const { gateway } = await gatewayWithTimers();
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    const upstreamSide = upstream().sockets.at(-1)!;
    const upstreamClosed = new Promise<number>((resolve) => upstreamSide.once('close', resolve));
    // Five kilobytes each way fit the 10,485 bytes; the sixth on its way up fills them.
    for (let i = 0; i < 5; i += 1) await echo(ws, kilobyte);
    const ended = closed(ws);
    ws.send(kilobyte);
    expect(await ended).toEqual({ code: 1008, reason: 'byte quota exhausted' });
    expect(await upstreamClosed).toBe(1008);
    // The bytes moved are counted all the same: the restriction is full for every request after it.
    expect((await get(gateway)).status).toBe(429);
    await expect
      .poll(() => accessLines(gateway).find((line) => line.status === 101))
      .toMatchObject({
        webSocket: 'quota',
        quota: 'rejected',
        refusedBy: `${systemQuotaId}/0`,
      });
  });
});

describe.each(eachStore)('a WebSocket and the concurrency restriction, on %s', (_name, store) => {
  it('holds its slot for as long as it is open, and frees it when it closes', async () => {
    const gateway = await startTestGateway(petsConfig(upstream().url, store()));
    defer(() => gateway.close());
    await setQuota(gateway, { type: 'API', name: 'System', restrictions: [concurrency(1)] }, systemQuotaId);
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    const refused = await mustRefuse(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    expect(await echo(ws, 'still mine')).toBe('still mine');
    expect((await get(gateway)).status).toBe(429);
    ws.close();
    await closed(ws);
    await expect.poll(async () => (await get(gateway)).status).toBe(200);
  });
});

describe('WebSocket bytes across a fleet on Redis', () => {
  it('counts one byte limit for the fleet: a connection on the second gateway ends as its bytes pass what the first charged', async () => {
    const timersA = new FakeTimers();
    const timersB = new FakeTimers();
    const [a, b] = await startFleetOfTwo(
      defer,
      { apis: petsConfig(upstream().url).apis },
      { clocks: [{ timers: timersA }, { timers: timersB }] },
    );
    await setQuota(a, { type: 'API', name: 'System', restrictions: [mb(0.01, 1, 'minute')] }, systemQuotaId);
    await expect.poll(async () => (await get(b)).headers['ratelimit-policy']).toMatch(/q=10485/);
    const onA = (await mustOpen(wsUrl(a.url, '/pets/1'), withKey)).ws;
    const onB = (await mustOpen(wsUrl(b.url, '/pets/1'), withKey)).ws;
    // Each moves about 6,100 bytes: less than the limit alone, more than it together.
    for (let i = 0; i < 3; i += 1) await echo(onA, kilobyte);
    timersA.advance(1_000);
    await expect.poll(() => remaining(b)).toBeLessThan(limit - 6_000);
    // B's timers are never moved: B charges as it passes its share of the room it knows of.
    const ended = closed(onB);
    for (let i = 0; i < 3; i += 1) onB.send(kilobyte);
    expect((await ended).code).toBe(1008);
    expect(await echo(onA, 'a is charged already')).toBe('a is charged already');
    onA.close();
  });
});

describe('a WebSocket upgrade whose path is spelled otherwise', () => {
  it('routes to the method of the plain spelling and is counted on its restriction', async () => {
    const gateway = await startTestGateway(petsConfig(upstream().url));
    defer(() => gateway.close());
    const spellings = [
      '/pets/%37',
      '/%70ets/7',
      '//pets//7',
      '/pets/./7',
      '/pets/x/../7',
      'http://gw/pets/7',
    ];
    // Each spelling and the plain one, on getPet alone: the plain one finds the count spent.
    const onGetPet = { api: petsApiId, method: getPetMethodId };
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(spellings.length, 1, 'minute', onGetPet)] },
      systemQuotaId,
    );
    const authorization = `Authorization: ${withKey.authorization}`;
    for (const path of spellings) {
      const opened = await rawWebSocket(gateway.url, handshake(path, [authorization]));
      opened.socket.destroy();
      expect(upstream().upgrades.at(-1)!.url).toBe('/7');
    }
    await expect(rawWebSocket(gateway.url, handshake('/pets/7', [authorization]))).rejects.toThrow(
      /^not opened: HTTP\/1\.1 429/,
    );
    // A WebSocket's line is written when it closes: after the refusal's, at times.
    const seen = () => accessLines(gateway).map((line) => `${line.method} ${line.status}`);
    await expect.poll(() => seen().sort()).toEqual([...spellings.map(() => 'getPet 101'), 'getPet 429']);
  });
});
