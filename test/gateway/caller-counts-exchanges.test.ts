import http, { type IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore } from '../helpers/enforcement-gateways.js';
import { useEventStreamUpstream } from '../helpers/event-stream-upstream.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { withKey } from '../helpers/grpc-credentials.js';
import { startHoldingUpstream, type HoldingUpstream } from '../helpers/holding-upstream.js';
import { request } from '../helpers/raw-http.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';
import {
  accessLines,
  concurrency,
  mb,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { closed, echo, mustOpen, startWebSocketUpstream, wsUrl } from '../helpers/websockets.js';

/**
 * Restrictions counted by caller (issue 33, item 1) where a request holds its count for as long as it
 * runs: concurrency slots, the bytes of a long-lived exchange charged on each tick, and shadow
 * restrictions; each must take and charge the caller's own count, never the one all callers share.
 */
const defer = cleanupAfterEach();
const trusted = { trustProxy: ['127.0.0.1'] };
/** The request fields of a client at `address`, behind the trusted proxy the tests' requests come from. */
const from = (address: string) => ({ ...withKey, 'x-forwarded-for': address });
const getFrom = (gateway: TestGateway, address: string) =>
  request(gateway.url, { path: '/pets/1', headers: from(address) });
const setSystem = (gateway: TestGateway, ...restrictions: object[]) =>
  setQuota(gateway, { type: 'API', name: 'System', restrictions }, systemQuotaId);
const shadow = (restriction: object) => ({ ...restriction, mode: 'shadow' });

const events = useEventStreamUpstream();
const webSockets = useSuiteUpstream(() => startWebSocketUpstream());
/** One event of 1,000 bytes. */
const event = `data: ${'e'.repeat(992)}\n\n`;

describe.each(eachStore)(
  'restrictions counted by caller that hold a count while a request runs, on %s',
  (_n, store) => {
    async function gatewayOverHolding(): Promise<[TestGateway, HoldingUpstream]> {
      const upstream = await startHoldingUpstream();
      defer(() => upstream.close());
      const gateway = await startTestGateway(petsConfig(upstream.url, { ...trusted, ...store() }));
      defer(() => gateway.close());
      return [gateway, upstream];
    }

    /** Starts a request from `address` that the upstream holds, and waits until it holds it. */
    async function holdFrom(gateway: TestGateway, upstream: HoldingUpstream, address: string) {
      const before = upstream.held();
      const answer = getFrom(gateway, address);
      await expect.poll(() => upstream.held()).toBe(before + 1);
      // Wrapped: awaiting this must not wait for the answer.
      return { answer };
    }

    it('give each caller its own concurrency slots, and free them on its own count', async () => {
      const [gateway, upstream] = await gatewayOverHolding();
      await setSystem(gateway, concurrency(1, { by: 'client' }));
      const first = await holdFrom(gateway, upstream, '198.51.100.1');
      const refused = await getFrom(gateway, '198.51.100.1');
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBe('1');
      // Another client has a slot of its own while the first one's is taken.
      const other = await holdFrom(gateway, upstream, '198.51.100.2');
      expect((await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]).toMatchObject({
        by: 'client',
        callers: 2,
        used: 1,
      });
      // The first client's request ends: the slot freed is its own, the other client's stays taken (its
      // request still runs). The first takes its slot again; the other is still refused.
      upstream.answerOne();
      expect((await first.answer).status).toBe(200);
      await expect
        .poll(async () => (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0])
        .toMatchObject({ callers: 1, used: 1 });
      const again = await holdFrom(gateway, upstream, '198.51.100.1');
      expect((await getFrom(gateway, '198.51.100.2')).status).toBe(429);
      upstream.answerAll();
      expect([(await other.answer).status, (await again.answer).status]).toEqual([200, 200]);
      await expect
        .poll(async () => (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]!.used)
        .toBe(0);
    });

    it('count a shadow concurrency restriction per caller: only the caller past its slots is logged as refused', async () => {
      const [gateway, upstream] = await gatewayOverHolding();
      await setSystem(gateway, shadow(concurrency(1, { by: 'client' })));
      const held = [
        await holdFrom(gateway, upstream, '198.51.100.1'),
        await holdFrom(gateway, upstream, '198.51.100.2'),
      ];
      held.push(await holdFrom(gateway, upstream, '198.51.100.1'));
      // Two callers' counts, not one of everybody's.
      expect((await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]).toMatchObject({
        mode: 'shadow',
        callers: 2,
      });
      upstream.answerAll();
      expect((await Promise.all(held.map((hold) => hold.answer))).map((answer) => answer.status)).toEqual([
        200, 200, 200,
      ]);
      await expect.poll(() => accessLines(gateway).length).toBe(3);
      // The second request of 198.51.100.1 is the one past its slot; 198.51.100.2 had a slot of its own.
      const byRequest = accessLines(gateway)
        .map((line) => [line.client, line.quota, line.refusedBy ?? null] as const)
        .sort(([a, aQuota], [b, bQuota]) => `${a} ${aQuota}`.localeCompare(`${b} ${bQuota}`));
      expect(byRequest).toEqual([
        ['198.51.100.1', 'allowed', null],
        ['198.51.100.1', 'shadow_refused', `${systemQuotaId}/0`],
        ['198.51.100.2', 'allowed', null],
      ]);
    });

    it('count a shadow throttle per caller beside the enforced one its twin is', async () => {
      const gateway = await startTestGateway(petsConfig(events.upstream().url, { ...trusted, ...store() }));
      defer(() => gateway.close());
      await setSystem(gateway, throttle(3, 1, 'minute'), shadow(throttle(1, 1, 'minute', { by: 'client' })));
      const statuses = [];
      for (const address of ['198.51.100.1', '198.51.100.2', '198.51.100.1'])
        statuses.push((await getFrom(gateway, address)).status);
      expect(statuses).toEqual([200, 200, 200]);
      await expect.poll(() => accessLines(gateway).length).toBe(3);
      expect(accessLines(gateway).map((line) => line.quota)).toEqual([
        'allowed',
        'allowed',
        'shadow_refused',
      ]);
      expect((await getFrom(gateway, '198.51.100.3')).status).toBe(429);
      expect((await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[1]).toMatchObject({
        mode: 'shadow',
        callers: 2,
        used: 1,
      });
    });

    it("charge an event stream's bytes as they pass to its caller's count, and cut it there", async () => {
      const timers = new FakeTimers();
      const gateway = await startTestGateway(
        petsConfig(events.upstream().url, { ...trusted, ...store() }),
        {},
        { timers },
      );
      defer(() => gateway.close());
      defer(() => events.streams.splice(0).forEach((stream) => stream.destroy()));
      // mb(0.01): 10,485 bytes a minute, for each client apart.
      await setSystem(gateway, { ...mb(0.01, 1, 'minute'), by: 'client' });
      const response = await new Promise<IncomingMessage>((resolve, reject) => {
        const url = new URL(gateway.url);
        http
          .get(
            {
              host: url.hostname,
              port: url.port,
              path: '/pets/stream',
              headers: from('198.51.100.1'),
              agent: false,
            },
            resolve,
          )
          .on('error', reject);
      });
      const whole = new Promise<boolean>((resolve) =>
        response.once('close', () => resolve(response.complete)),
      );
      response.resume();
      await expect.poll(() => events.streams.length).toBe(1);
      // The timers are never moved: the eleventh event fills the room as it passes.
      for (let i = 0; i < 11; i += 1) events.streams[0]!.write(event);
      expect(await whole).toBe(false);
      // The bytes were the streaming client's: it is refused, another client is not.
      expect((await getFrom(gateway, '198.51.100.1')).status).toBe(429);
      expect((await getFrom(gateway, '198.51.100.2')).status).toBe(200);
    });

    it("charge a WebSocket's frame bytes as they pass to its caller's count, and close it there with 1008", async () => {
      const timers = new FakeTimers();
      const gateway = await startTestGateway(
        petsConfig(webSockets().url, { ...trusted, ...store() }),
        {},
        { timers },
      );
      defer(() => gateway.close());
      await setSystem(gateway, { ...mb(0.01, 1, 'minute'), by: 'client' });
      const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), from('198.51.100.1'));
      // Five kilobytes each way fit the 10,485 bytes the client may move in a minute; the sixth on its
      // way up fills them, with the timers never moved.
      for (let i = 0; i < 5; i += 1) await echo(ws, 'k'.repeat(1_000));
      const ended = closed(ws);
      ws.send('k'.repeat(1_000));
      expect(await ended).toEqual({ code: 1008, reason: 'byte quota exhausted' });
      expect((await getFrom(gateway, '198.51.100.1')).status).toBe(429);
      expect((await getFrom(gateway, '198.51.100.2')).status).toBe(200);
    });
  },
);
