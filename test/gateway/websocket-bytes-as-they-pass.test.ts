import { describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore, get } from '../helpers/enforcement-gateways.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import {
  accessLines,
  basicAuth,
  devKey,
  mb,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { floodingClient, startFloodingUpstream, wsUrl, type FloodingClient } from '../helpers/websockets.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

/**
 * A WebSocket's bytes are charged as they pass (issue 42, point 4): the cut comes from the bytes that
 * fill the room, never from the tick, whose injected timers no test here moves.
 */
const defer = cleanupAfterEach();
const frames = 200;
const frameBytes = 16_384;
const upstream = useSuiteUpstream(() => startFloodingUpstream(frames, frameBytes));
const withKey = { authorization: basicAuth(devKey) };
/** mb(0.1): 104,857 bytes a minute, both directions together. */
const limit = 104_857;
/** The most a socket read hands the gateway at once (libuv reads 64 KiB): the chunk that fills the room. */
const chunk = 65_536;

async function gatewayWithLimit(store: Record<string, unknown>, megabytes = 0.1): Promise<TestGateway> {
  // Timers that never fire: the tick never charges, nor does a ping go out.
  const gateway = await startTestGateway(
    petsConfig(upstream().url, { ...store, accessLog: { flushMs: 0 } }),
    {},
    { timers: new FakeTimers() },
  );
  defer(() => gateway.close());
  await setQuota(
    gateway,
    { type: 'API', name: 'System', restrictions: [mb(megabytes, 1, 'minute')] },
    systemQuotaId,
  );
  return gateway;
}

/** Resolves once the upstream's side of `ws` has closed: every byte relayed to it has been read. */
const upstreamClosed = (ws: WebSocket): Promise<void> =>
  ws.readyState === ws.CLOSED
    ? Promise.resolve()
    : new Promise((resolve) => ws.once('close', () => resolve()));

/** Waits for the flood to end one way or the other: the connection closed, or every frame echoed. */
async function floodEnds(
  client: FloodingClient,
  expectedWhole: number,
): Promise<{ code: number; reason: string } | 'whole'> {
  let whole: () => void = () => undefined;
  const timer = setInterval(() => {
    if (client.received() >= expectedWhole) whole();
  }, 20);
  try {
    return await Promise.race([
      client.closed,
      new Promise<'whole'>((resolve) => (whole = () => resolve('whole'))),
    ]);
  } finally {
    clearInterval(timer);
  }
}

describe.each(eachStore)(
  'a WebSocket flood against throttlemb, charged as it passes, on %s',
  (name, store) => {
    it('ends a client flood (echoed) with 1008 within one chunk past the limit, the tick never run', async () => {
      const gateway = await gatewayWithLimit(store());
      const before = upstream().receivedBytes();
      const client = await floodingClient(wsUrl(gateway.url, '/pets/1'), withKey);
      defer(() => client.ws.terminate());
      client.flood(frames, frameBytes);
      const ended = await floodEnds(client, frames * frameBytes);
      expect(ended).toEqual({ code: 1008, reason: 'byte quota exhausted' });
      await upstreamClosed(upstream().sockets.at(-1)!);
      const passed = upstream().receivedBytes() - before + client.received();
      expect(passed).toBeGreaterThan(limit - chunk);
      expect(passed).toBeLessThanOrEqual(limit + chunk);
      expect((await get(gateway)).status).toBe(429);
      await expect
        .poll(() => accessLines(gateway).find((line) => line.status === 101))
        .toMatchObject({ webSocket: 'quota', quota: 'rejected', refusedBy: `${systemQuotaId}/0` });
    });

    it('ends an upstream flood with 1008 within one chunk past the limit, the tick never run', async () => {
      const gateway = await gatewayWithLimit(store());
      const client = await floodingClient(wsUrl(gateway.url, '/pets/flood'), withKey);
      defer(() => client.ws.terminate());
      const ended = await floodEnds(client, frames * frameBytes);
      expect(ended).toEqual({ code: 1008, reason: 'byte quota exhausted' });
      expect(client.received()).toBeGreaterThan(limit - chunk);
      expect(client.received()).toBeLessThanOrEqual(limit + chunk);
      expect((await get(gateway)).status).toBe(429);
    });

    it('shares the room among six sockets flooding together: all of them within one chunk each past it', async () => {
      // 1 MB a minute: six sockets that each spent the whole room would move 6 MB.
      const gateway = await gatewayWithLimit(store(), 1);
      const before = upstream().receivedBytes();
      const opened = upstream().sockets.length;
      const clients = await Promise.all(
        Array.from({ length: 6 }, () => floodingClient(wsUrl(gateway.url, '/pets/1'), withKey)),
      );
      for (const client of clients) defer(() => client.ws.terminate());
      for (const client of clients) client.flood(frames, frameBytes);
      // 200 frames of 16 KiB each way: 6.5 MB a socket, were it let through.
      const ends = await Promise.all(clients.map((client) => floodEnds(client, frames * frameBytes)));
      expect(ends).not.toContain('whole');
      await Promise.all(upstream().sockets.slice(opened).map(upstreamClosed));
      const passed =
        upstream().receivedBytes() - before + clients.reduce((sum, client) => sum + client.received(), 0);
      // docs/quotas.md: one chunk a socket past the limit with the memory store; with Redis, where a
      // charge waits for its answer, measured within two (1.43 to 1.59 MB).
      const chunksPerSocket = name === 'the memory store' ? 1 : 2;
      expect(passed).toBeLessThanOrEqual(1_048_576 + 6 * chunksPerSocket * chunk);
      // Each was ended for its bytes: none stayed open, nor was the room given six times over.
      await expect
        .poll(() =>
          accessLines(gateway)
            .filter((line) => line.status === 101)
            .map((line) => line.webSocket),
        )
        .toEqual(Array(6).fill('quota'));
    });
  },
);
