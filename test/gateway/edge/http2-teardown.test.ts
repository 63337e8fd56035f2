import type { ChildProcess } from 'node:child_process';
import { describe, expect, inject, it } from 'vitest';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import {
  heldKinds,
  heldRequest,
  holdStreamsInChild,
  openHeldStreams,
  startFreezableRelay,
  startHeldStreamUpstreams,
  type HeldKind,
  type HeldStreamUpstreams,
} from '../../helpers/held-streams.js';
import { http2Session } from '../../helpers/http2-client.js';
import {
  accessLines,
  basicAuth,
  concurrency,
  devKey,
  mb,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../../helpers/test-gateway.js';

/**
 * Issue 42, point 0: every stream of an HTTP/2 session that ends (its client destroys it, its client is
 * killed, its client vanishes and the gateway's PING goes unanswered) ends its exchange: the upstream
 * request is cut, the `concurrency` slot is freed, the bytes are charged, and one access line per stream
 * says the client left. Plain answers, event streams and server-streaming gRPC calls alike.
 */
const defer = cleanupAfterEach();
const keepAliveTimeout = 5_000;

interface Setup {
  upstreams: HeldStreamUpstreams;
  /** The gateway the client holds its streams on. */
  gateway: TestGateway;
  /** Where the slots are read and the next request is sent: the same gateway, or the other of a fleet. */
  peer: TestGateway;
  clock: FakeClock;
}

/** One gateway on the memory store, or a fleet of two on Redis, with 2 slots and a byte count in all. */
async function setUp(fleet = false): Promise<Setup> {
  const upstreams = await startHeldStreamUpstreams();
  defer(() => upstreams.close());
  const clock = new FakeClock();
  const store = fleet
    ? { store: { type: 'redis', url: inject('redisUrl'), prefix: `test:h2-teardown:${Math.random()}:` } }
    : {};
  const config = petsConfig('http://127.0.0.1:9', {
    apis: upstreams.apis,
    server: { keepAliveTimeout },
    ...store,
  });
  const gateway = await startTestGateway(config, {}, { timers: clock });
  defer(() => gateway.close());
  const peer = fleet ? await startTestGateway(config) : gateway;
  if (fleet) defer(() => peer.close());
  await setQuota(
    gateway,
    { type: 'API', name: 'System', restrictions: [concurrency(2), mb(1, 1, 'minute')] },
    systemQuotaId,
  );
  // The peer follows the definitions the first wrote (pub/sub).
  await expect.poll(async () => (await quotaUsage(peer.adminUrl, systemQuotaId)).restrictions.length).toBe(2);
  return { upstreams, gateway, peer, clock };
}

/** Two requests of `kind`, tagged `<tag>-1` and `<tag>-2`. */
const twoOf = (kind: HeldKind, tag: string) => [1, 2].map((n) => heldRequest(kind, `${tag}-${n}`));

const linesOf = (gateway: TestGateway, tag: string) =>
  accessLines(gateway).filter((line) => String(line.requestId).startsWith(`${tag}-`));

const usage = async (gateway: TestGateway) => {
  const [slots, bytes] = (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions;
  return { slots: slots!.used, bytes: bytes!.used };
};

const get = (gateway: TestGateway) =>
  fetch(`${gateway.url}/pets/1`, { headers: { authorization: basicAuth(devKey) } });

/** Both streams are open upstream and hold both slots: a third request is refused. */
async function expectBothHeld({ upstreams, peer }: Setup): Promise<void> {
  expect(upstreams.open()).toBe(2);
  expect((await usage(peer)).slots).toBe(2);
  expect((await get(peer)).status).toBe(429);
}

/** After the teardown: nothing open upstream, two lines that say the client left, charged, slots free. */
async function expectBothEnded(setup: Setup, kind: HeldKind, tag: string): Promise<void> {
  const { upstreams, gateway, peer } = setup;
  await expect.poll(() => upstreams.open()).toBe(0);
  await expect.poll(() => linesOf(gateway, tag).length).toBe(2);
  const lines = linesOf(gateway, tag);
  const api = kind === 'grpc' ? 'Greeter' : 'Pet Store';
  for (const line of lines)
    expect(line).toMatchObject({ api, protocol: 'HTTP/2', status: 200, outcome: 'client_aborted' });
  expect(lines.every((line) => (line.bytesOut as number) > 0)).toBe(true);
  const moved = lines.reduce((sum, line) => sum + (line.bytesIn as number) + (line.bytesOut as number), 0);
  await expect.poll(() => usage(peer)).toEqual({ slots: 0, bytes: moved });
  const next = await get(peer);
  expect(next.status).toBe(200);
  expect(await next.text()).toBe('ok');
}

/** A client opens two answers of `kind` on one session, then destroys the session. */
async function destroySessionOfTwo(setup: Setup, kind: HeldKind, tag: string): Promise<void> {
  const session = await http2Session(setup.gateway.url);
  defer(() => session.destroy());
  await openHeldStreams(session, twoOf(kind, tag));
  await expectBothHeld(setup);
  session.destroy();
  await expectBothEnded(setup, kind, tag);
}

describe.each(heldKinds)('an HTTP/2 session with two %s answers open', (kind) => {
  it('ends both exchanges when its client destroys the session', async () => {
    await destroySessionOfTwo(await setUp(), kind, `destroyed-${kind}`);
  });

  it('ends both exchanges when the client process is killed (SIGKILL)', async () => {
    const setup = await setUp();
    const tag = `killed-${kind}`;
    const child: ChildProcess = await holdStreamsInChild(setup.gateway.url, twoOf(kind, tag));
    defer(() => void child.kill('SIGKILL'));
    await expectBothHeld(setup);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    await expectBothEnded(setup, kind, tag);
  });

  it('ends both exchanges when its client vanishes and leaves the PING of keepAliveTimeout unanswered', async () => {
    const setup = await setUp();
    const relay = await startFreezableRelay(Number(new URL(setup.gateway.url).port));
    defer(() => relay.close());
    const session = await http2Session(`http://127.0.0.1:${relay.port}`);
    defer(() => session.destroy());
    const tag = `vanished-${kind}`;
    await openHeldStreams(session, twoOf(kind, tag));
    await expectBothHeld(setup);
    relay.freeze();
    // The first check sends a PING; the client cannot answer it, and the next one finds it unanswered.
    await setup.clock.advance(keepAliveTimeout);
    expect(setup.upstreams.open()).toBe(2);
    await setup.clock.advance(keepAliveTimeout);
    await expectBothEnded(setup, kind, tag);
  });
});

describe('an HTTP/2 client that answers the PING', () => {
  it('keeps its session and its streams open past keepAliveTimeout, however often it is asked', async () => {
    const setup = await setUp();
    const session = await http2Session(setup.gateway.url);
    defer(() => session.destroy());
    const tag = 'answering';
    await openHeldStreams(session, twoOf('events', tag));
    for (let i = 0; i < 3; i += 1) {
      const pinged = new Promise((resolve) => session.once('ping', resolve));
      await setup.clock.advance(keepAliveTimeout);
      await pinged;
      // The client's ACK went before this PING of its own: once the gateway answers it, it has read the ACK.
      await new Promise((resolve) => session.ping(resolve));
    }
    await setup.clock.advance(keepAliveTimeout);
    expect(session.destroyed).toBe(false);
    expect(setup.upstreams.open()).toBe(2);
    expect(linesOf(setup.gateway, tag)).toHaveLength(0);
  });
});

describe.each(heldKinds)('a fleet of 2 on Redis, with two %s answers open on one gateway', (kind) => {
  it('frees both slots for the whole fleet when the client destroys its session', async () => {
    await destroySessionOfTwo(await setUp(true), kind, `fleet-${kind}`);
  });
});
