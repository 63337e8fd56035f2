import { spawn } from 'node:child_process';
import http2, { type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import path from 'node:path';
import { status as grpcStatus } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { metadataOf, greeterClient } from '../helpers/grpc-greeter.js';
import {
  heldKinds,
  heldRequest,
  startHeldStreamUpstreams,
  type HeldKind,
  type HeldStreamUpstreams,
} from '../helpers/held-streams.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { startHoldingUpstream } from '../helpers/holding-upstream.js';
import { http2Session } from '../helpers/http2-client.js';
import { basicAuth, devKey, mb, petsConfig, setQuota, systemQuotaId } from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import { endedOnce, startTracedGateway, type TracedGateway } from '../helpers/traced-endings.js';

/**
 * Issue 46: every way an exchange ends ends its server span, once, beside its one access line and of its
 * trace: a client killed or leaving mid-answer (HTTP/1.1, an event stream), an HTTP/2 stream reset, a
 * session told to go with an error or destroyed, a gRPC call cancelled, an upstream out of time. The
 * upstream's open answers are counted: each ending reaches it.
 */
const defer = cleanupAfterEach();

async function setUp(): Promise<TracedGateway & { upstreams: HeldStreamUpstreams }> {
  const upstreams = await startHeldStreamUpstreams();
  defer(() => upstreams.close());
  const traced = await startTracedGateway(petsConfig('http://127.0.0.1:9', { apis: upstreams.apis }), defer);
  return { ...traced, upstreams };
}

/** Opens the answers of `kind` tagged `ids` on `session`; resolves with their streams once each began. */
async function openStreams(session: ClientHttp2Session, kind: HeldKind, ids: string[]) {
  return Promise.all(
    ids.map((id) => {
      const { headers, body } = heldRequest(kind, id);
      const stream: ClientHttp2Stream = session.request(headers);
      stream.on('error', () => undefined);
      stream.end(body ?? undefined);
      return new Promise<ClientHttp2Stream>((resolve) => stream.once('data', () => resolve(stream)));
    }),
  );
}

/** Each exchange's span: answered (200) and then left by its client, what moved counted each way. */
async function expectLeft(traced: TracedGateway, ids: string[], version: string): Promise<void> {
  for (const { line, span } of (await endedOnce(traced, ids)).values()) {
    expect(line).toMatchObject({ status: 200, outcome: 'client_aborted' });
    expect(span.attributes).toMatchObject({
      'network.protocol.version': version,
      'quotagate.decision': 'admitted',
    });
    expect(span.attributes['http.response.body.size']).toBeGreaterThan(0);
  }
}

const holder = path.resolve('test/fixtures/http1/hold-answer.mjs');

describe('an HTTP/1.1 answer its client does not take to its end', () => {
  it.each(['plain', 'events'] as const)(
    'ends the span of a %s answer once when its client process is killed mid-answer',
    async (kind) => {
      const setup = await setUp();
      const id = `killed-${kind}`;
      const child = spawn(
        process.execPath,
        [
          holder,
          `${setup.gateway.url}/pets/${kind}-${id}`,
          JSON.stringify({ authorization: basicAuth(devKey), 'x-request-id': id }),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      defer(() => void child.kill('SIGKILL'));
      await new Promise((resolve, reject) => {
        child.stdout.once('data', resolve);
        child.once('exit', (code) => reject(new Error(`the client exited first (${code})`)));
      });
      expect(setup.upstreams.open()).toBe(1);
      child.kill('SIGKILL');
      await expect.poll(() => setup.upstreams.open()).toBe(0);
      await expectLeft(setup, [id], '1.1');
    },
  );

  it('ends the span of an event stream once when its client stops reading it (fetch aborted)', async () => {
    const setup = await setUp();
    const leaving = new AbortController();
    const res = await fetch(`${setup.gateway.url}/pets/events-left`, {
      headers: { authorization: basicAuth(devKey), 'x-request-id': 'left' },
      signal: leaving.signal,
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    await res.body!.getReader().read();
    leaving.abort();
    await expect.poll(() => setup.upstreams.open()).toBe(0);
    await expectLeft(setup, ['left'], '1.1');
  });
});

describe.each(heldKinds)('an HTTP/2 session with two %s answers open', (kind) => {
  const ids = (tag: string) => [`${tag}-${kind}-1`, `${tag}-${kind}-2`];

  it('ends each span once when its client resets the streams (RST_STREAM CANCEL)', async () => {
    const setup = await setUp();
    const session = await http2Session(setup.gateway.url);
    defer(() => session.destroy());
    const streams = await openStreams(session, kind, ids('reset'));
    expect(setup.upstreams.open()).toBe(2);
    for (const stream of streams) stream.close(http2.constants.NGHTTP2_CANCEL);
    await expect.poll(() => setup.upstreams.open()).toBe(0);
    await expectLeft(setup, ids('reset'), '2');
  });

  it('ends each span once when its client sends GOAWAY with an error', async () => {
    const setup = await setUp();
    const session = await http2Session(setup.gateway.url);
    defer(() => session.destroy());
    await openStreams(session, kind, ids('goaway'));
    expect(setup.upstreams.open()).toBe(2);
    session.goaway(http2.constants.NGHTTP2_INTERNAL_ERROR);
    await expect.poll(() => setup.upstreams.open()).toBe(0);
    await expectLeft(setup, ids('goaway'), '2');
  });

  it('ends each span once when its client destroys the session', async () => {
    const setup = await setUp();
    const session = await http2Session(setup.gateway.url);
    await openStreams(session, kind, ids('destroyed'));
    expect(setup.upstreams.open()).toBe(2);
    session.destroy();
    await expect.poll(() => setup.upstreams.open()).toBe(0);
    await expectLeft(setup, ids('destroyed'), '2');
  });
});

describe('a gRPC call and an upstream out of time', () => {
  it('ends the span of a server-streaming call its client cancels, once, with no status given', async () => {
    const setup = await setUp();
    const client = greeterClient(new URL(setup.gateway.url).host);
    defer(() => client.close());
    const call = client.streamHellos(
      'held',
      metadataOf({ authorization: basicAuth(devKey), 'x-request-id': 'cancelled' }),
    );
    await expect.poll(() => call.replies.length).toBe(1);
    expect(setup.upstreams.open()).toBe(1);
    call.cancel();
    expect((await call.outcome).status.code).toBe(grpcStatus.CANCELLED);
    await expect.poll(() => setup.upstreams.open()).toBe(0);
    const { line, span } = (await endedOnce(setup, ['cancelled'])).get('cancelled')!;
    expect(line).toMatchObject({ status: 200, outcome: 'client_aborted', api: 'Greeter' });
    expect(span.attributes).toMatchObject({ 'rpc.system': 'grpc', 'quotagate.form': 'call' });
    // The client left before it was given a status: the span names none, as the access line does.
    expect(line.grpcStatus).toBeUndefined();
    expect(span.attributes['rpc.grpc.status_code']).toBeUndefined();
  });

  it('ends the span of an exchange whose upstream does not answer within proxyTimeout, failed (504)', async () => {
    const upstream = await startHoldingUpstream();
    defer(() => upstream.close());
    const clock = new FakeClock();
    const traced = await startTracedGateway(
      petsConfig(`${upstream.url}/pets`, { proxyTimeout: 1_000 }),
      defer,
      { timers: clock },
    );
    const answer = fetch(`${traced.gateway.url}/pets/1`, {
      headers: { authorization: basicAuth(devKey), 'x-request-id': 'late' },
    });
    await expect.poll(() => upstream.held()).toBe(1);
    await clock.advance(1_000);
    expect((await answer).status).toBe(504);
    await expect.poll(() => upstream.held()).toBe(0);
    const { span } = (await endedOnce(traced, ['late'])).get('late')!;
    expect(span.attributes).toMatchObject({
      'http.response.status_code': 504,
      'quotagate.upstream.outcome': 'timeout',
      'error.type': '504',
    });
    expect(span.status.code).toBe(2);
  });
});

describe('an exchange its client leaves before any answer', () => {
  it('ends its span once with 499 when it left while the upstream had it, admitted', async () => {
    const upstream = await startHoldingUpstream();
    defer(() => upstream.close());
    const traced = await startTracedGateway(petsConfig(`${upstream.url}/pets`), defer);
    const leaving = new AbortController();
    const answer = fetch(`${traced.gateway.url}/pets/1`, {
      headers: { authorization: basicAuth(devKey), 'x-request-id': 'gone' },
      signal: leaving.signal,
    });
    await expect.poll(() => upstream.held()).toBe(1);
    leaving.abort();
    await expect(answer).rejects.toThrow();
    await expect.poll(() => upstream.held()).toBe(0);
    const { span } = (await endedOnce(traced, ['gone'])).get('gone')!;
    expect(span.attributes).toMatchObject({
      'http.response.status_code': 499,
      // It went upstream: client_left is the decision of a client that left before the gateway's.
      'quotagate.decision': 'admitted',
      'quotagate.upstream.outcome': 'client_aborted',
    });
  });
});

describe('an exchange the gateway cuts', () => {
  it('ends the span of an event stream cut as it fills a byte restriction once, ended by quota', async () => {
    // 200 KB of events as fast as they go, through 104,857 bytes a minute.
    const upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.on('error', () => undefined);
      for (let i = 0; i < 200 && !res.destroyed; i += 1) res.write(`data: ${'e'.repeat(992)}\n\n`);
    });
    defer(() => upstream.close());
    // Timers never moved: the bytes themselves fill the restriction, not the tick.
    const traced = await startTracedGateway(petsConfig(`${upstream.url}/pets`), defer, {
      timers: new FakeTimers(),
    });
    await setQuota(
      traced.gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.1, 1, 'minute')] },
      systemQuotaId,
    );
    const res = await fetch(`${traced.gateway.url}/pets/stream`, {
      headers: { authorization: basicAuth(devKey), 'x-request-id': 'filled' },
    });
    await expect(res.text()).rejects.toThrow();
    const { line, span } = (await endedOnce(traced, ['filled'])).get('filled')!;
    expect(line).toMatchObject({ status: 200, endedBy: 'quota', quota: 'rejected' });
    expect(span.attributes).toMatchObject({ 'quotagate.ended_by': 'quota', 'quotagate.quota': 'rejected' });
  });
});
