import http, { type IncomingMessage } from 'node:http';
import http2 from 'node:http2';
import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore, get } from '../helpers/enforcement-gateways.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { greeterApi, greeterClient, metadataOf, startGreeterUpstream } from '../helpers/grpc-greeter.js';
import { http2Session } from '../helpers/http2-client.js';
import {
  accessLines,
  adminCall,
  basicAuth,
  mb,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { credentials, withKey } from '../helpers/grpc-credentials.js';
import { useEventStreamUpstream } from '../helpers/event-stream-upstream.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

/**
 * Long-lived exchanges other than WebSockets are charged as they run (DESIGN.md round 4): an event
 * stream over HTTP/1.1 and HTTP/2 and a gRPC server-streaming call, charged on each tick of the injected
 * timers while they have room, and ended in their protocol's form by the bytes that fill a byte
 * restriction as they pass, with no tick (issue 42, point 4), on both stores.
 */
const defer = cleanupAfterEach();
/** mb(0.01): 10,485 bytes a minute; eleven events of 1,000 bytes pass it. */
const limit = 10_485;
const event = `data: ${'e'.repeat(992)}\n\n`;

/** The event streams the upstream holds open (`/pets/stream`): the test sends each event. */
const { upstream, streams } = useEventStreamUpstream();
const greeter = useSuiteUpstream(() => startGreeterUpstream());

/** Sends `count` events on the last stream the upstream opened. */
async function sendEvents(count: number): Promise<void> {
  await expect.poll(() => streams.length).toBeGreaterThan(0);
  for (let i = 0; i < count; i += 1) streams.at(-1)!.write(event);
}

/** Resolves once `stream` has delivered `bytes` body bytes. */
function received(stream: NodeJS.ReadableStream, bytes: number): Promise<void> {
  let seen = 0;
  return new Promise((resolve) => {
    stream.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen >= bytes) resolve();
    });
  });
}

/** The bytes the next request of the System quota may still move, as its RateLimit field says. */
async function remaining(gateway: TestGateway): Promise<number> {
  const answer = await get(gateway);
  return Number(/;r=(\d+);/.exec(String(answer.headers.ratelimit))?.[1]);
}

/** GET /pets/stream over HTTP/1.1: the response as it starts. */
function openStream(gateway: TestGateway, headers = withKey): Promise<IncomingMessage> {
  const url = new URL(gateway.url);
  return new Promise((resolve, reject) => {
    http
      .get({ host: url.hostname, port: url.port, path: '/pets/stream', headers, agent: false }, resolve)
      .on('error', reject);
  });
}

/** Whether an HTTP/1.1 response ended whole (true) or was cut (false). */
const endedWhole = (response: IncomingMessage): Promise<boolean> =>
  new Promise((resolve) => response.once('close', () => resolve(response.complete)).resume());

async function gatewayWithTimers(
  overrides: Record<string, unknown>,
  bytes = 0.01,
): Promise<{ gateway: TestGateway; timers: FakeTimers }> {
  const timers = new FakeTimers();
  const gateway = await startTestGateway(petsConfig(upstream().url, overrides), {}, { timers });
  defer(() => gateway.close());
  // A stream the gateway did not cut is ended by its upstream before the gateway closes.
  defer(() => streams.splice(0).forEach((stream) => stream.destroy()));
  await setQuota(
    gateway,
    { type: 'API', name: 'System', restrictions: [mb(bytes, 1, 'minute')] },
    systemQuotaId,
  );
  return { gateway, timers };
}

describe('a plain request and the tick', () => {
  it('charges a plain request once, when it ends, and keeps no tick once nothing is open', async () => {
    const { gateway, timers } = await gatewayWithTimers({});
    const used = async () => (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]?.used ?? 0;
    expect((await get(gateway)).status).toBe(200);
    await expect.poll(used).toBeGreaterThan(0);
    const once = await used();
    timers.advance(1_000);
    expect((await get(gateway)).status).toBe(200);
    await expect.poll(used).toBeGreaterThan(once);
    // Each plain answer moved the same bytes: the tick charged nothing more for the one that had ended.
    expect(await used()).toBe(2 * once);
    timers.advance(1_000);
    expect(timers.waiting()).toEqual([]);
  });
});

describe.each(eachStore)('open exchanges against throttlemb, on %s', (_name, store) => {
  it('charges an event stream over HTTP/1.1 on the tick while it has room, and cuts it as the events that fill it pass', async () => {
    const { gateway, timers } = await gatewayWithTimers({ ...store(), accessLog: { flushMs: 0 } });
    const response = await openStream(gateway);
    const whole = endedWhole(response);
    const arrived = received(response, 5 * event.length);
    await sendEvents(5);
    await arrived;
    timers.advance(1_000);
    await expect.poll(() => remaining(gateway)).toBeLessThanOrEqual(limit - 5_000);
    await sendEvents(6);
    expect(await whole).toBe(false);
    // The bytes it moved are counted all the same: the restriction is full for the requests after it.
    expect((await get(gateway)).status).toBe(429);
    await expect
      .poll(() => accessLines(gateway).find((line) => line.path === '/pets/stream'))
      .toMatchObject({ status: 200, endedBy: 'quota', quota: 'rejected', refusedBy: `${systemQuotaId}/0` });
  });

  it('resets an event stream over HTTP/2 with CANCEL as the events that fill the restriction pass', async () => {
    // Its timers are never moved: the tick never runs.
    const { gateway } = await gatewayWithTimers(store());
    const session = await http2Session(gateway.url);
    defer(() => session.close());
    const stream = session.request({ ':path': '/pets/stream', ...withKey });
    stream.on('error', () => undefined);
    const closed = new Promise<number | undefined>((resolve) =>
      stream.once('close', () => resolve(stream.rstCode)),
    );
    await sendEvents(11);
    expect(await closed).toBe(http2.constants.NGHTTP2_CANCEL);
    expect((await get(gateway)).status).toBe(429);
  });

  it('ends a gRPC server-streaming call RESOURCE_EXHAUSTED as the greetings that fill the restriction pass', async () => {
    // Its timers are never moved: the tick never runs.
    const { gateway } = await gatewayWithTimers(
      { apis: [greeterApi(`http://${greeter().address}`)], ...store() },
      0.001,
    );
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    // Three greetings of over 1,000 bytes each, and the call held open after them: the request and the
    // first greeting pass the 1,048 bytes.
    const call = client.streamHellos(`held ${'x'.repeat(1_000)}`, credentials());
    const { status: ended } = await call.outcome;
    expect(ended.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(ended.details).toBe('byte quota exhausted');
    expect(call.replies.length).toBeLessThanOrEqual(1);
  });
});

describe.each(eachStore)('a bidirectional gRPC call against throttlemb, on %s', (_name, store) => {
  it('ends the call RESOURCE_EXHAUSTED as the messages of both ways pass the limit', async () => {
    // Its timers are never moved: the tick never runs.
    const { gateway } = await gatewayWithTimers(
      { apis: [greeterApi(`http://${greeter().address}`)], ...store() },
      0.001,
    );
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    const chat = client.openChat(credentials());
    // Two messages of 1,000 bytes each way: about 4,000 bytes, where the limit is 1,048.
    chat.say('x'.repeat(1_000));
    chat.say('y'.repeat(1_000));
    const { status: ended } = await chat.outcome;
    expect(ended.code).toBe(status.RESOURCE_EXHAUSTED);
    // Cut before the upstream's answer began (the first message up fills the room), or after.
    expect(ended.details).toMatch(/^(Too Many Requests: )?byte quota exhausted$/);
    expect(chat.replies.length).toBeLessThanOrEqual(1);
  });
});

describe('open exchanges and the credentials that opened them', () => {
  /** An application made through the admin API, with a key: its id, the key's id and the key. */
  async function applicationWithKey(
    gateway: TestGateway,
  ): Promise<{ id: string; keyId: string; key: string }> {
    const app = await adminCall(gateway, 'POST', '/applications', { name: 'Feed reader' });
    const { id } = (await app.json()) as { id: string };
    const made = (await (await adminCall(gateway, 'POST', `/applications/${id}/apikeys`, {})).json()) as {
      id: string;
      key: string;
    };
    return { id, keyId: made.id, key: made.key };
  }

  it('cuts an event stream on the next tick once its key is revoked', async () => {
    const { gateway, timers } = await gatewayWithTimers({ accessLog: { flushMs: 0 } }, 10);
    const { id, keyId, key } = await applicationWithKey(gateway);
    const response = await openStream(gateway, { authorization: basicAuth(key) });
    const whole = endedWhole(response);
    await sendEvents(1);
    timers.advance(1_000);
    expect((await adminCall(gateway, 'DELETE', `/applications/${id}/apikeys/${keyId}`)).status).toBe(204);
    timers.advance(1_000);
    expect(await whole).toBe(false);
    await expect
      .poll(() => accessLines(gateway).find((line) => line.path === '/pets/stream'))
      .toMatchObject({ endedBy: 'revoked', application: 'Feed reader' });
  });

  it("checks an event stream again by its own method's scheme, not the top-level one", async () => {
    const [pets] = petsConfig(upstream().url).apis as Array<{ methods: object[] }>;
    const stream = {
      id: '2b3c4d5e-6f70-4182-9a3b-4c5d6e7f8091',
      name: 'stream',
      verb: 'GET',
      path: '/stream',
    };
    const { gateway, timers } = await gatewayWithTimers(
      {
        accessLog: { flushMs: 0 },
        APIKeyAuthType: 'jwt',
        jwt: { issuer: 'idp', audience: 'api', secret: 'a-shared-secret-of-at-least-32-bytes!' },
        apis: [{ ...pets, methods: [...pets!.methods, { ...stream, auth: 'basic' }] }],
      },
      10,
    );
    const { id, keyId, key } = await applicationWithKey(gateway);
    const response = await openStream(gateway, { authorization: basicAuth(key) });
    expect(response.statusCode).toBe(200);
    const both = received(response, 2 * event.length);
    const whole = endedWhole(response);
    await sendEvents(1);
    // Another application changes the directory: the next tick checks every open exchange again.
    await applicationWithKey(gateway);
    timers.advance(1_000);
    streams.at(-1)!.write(event);
    await both;
    expect((await adminCall(gateway, 'DELETE', `/applications/${id}/apikeys/${keyId}`)).status).toBe(204);
    timers.advance(1_000);
    expect(await whole).toBe(false);
    await expect
      .poll(() => accessLines(gateway).find((line) => line.path === '/pets/stream'))
      .toMatchObject({ endedBy: 'revoked', application: 'Feed reader' });
  });

  it('ends a gRPC streaming call UNAUTHENTICATED on the next tick once its application is deleted', async () => {
    const { gateway, timers } = await gatewayWithTimers(
      { apis: [greeterApi(`http://${greeter().address}`)] },
      10,
    );
    const { id, key } = await applicationWithKey(gateway);
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    const call = client.streamHellos('held', metadataOf({ authorization: basicAuth(key) }));
    await expect.poll(() => call.replies.length).toBe(3);
    expect((await adminCall(gateway, 'DELETE', `/applications/${id}`)).status).toBe(204);
    timers.advance(1_000);
    const { status: ended } = await call.outcome;
    expect(ended.code).toBe(status.UNAUTHENTICATED);
    expect(ended.details).toBe('credentials revoked');
  });
});
