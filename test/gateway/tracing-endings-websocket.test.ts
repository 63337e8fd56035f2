import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { basicAuth, devKey, mb, petsConfig, setQuota, systemQuotaId } from '../helpers/test-gateway.js';
import { endedOnce, startTracedGateway, type TracedGateway } from '../helpers/traced-endings.js';
import {
  closed,
  echo,
  mustOpen,
  startWebSocketUpstream,
  wsUrl,
  type WebSocketUpstream,
} from '../helpers/websockets.js';

/**
 * Issue 46: the server span of a WebSocket ends once, when the connection closes, whoever closes it: its
 * client vanishing without a close frame, its upstream, the gateway closing, a byte restriction filled.
 * It says how it ended and the frame bytes each way, as its access line does, of the same trace.
 */
const defer = cleanupAfterEach();

const shutdownTimeout = 300;

async function setUp(): Promise<TracedGateway & { upstream: WebSocketUpstream; timers: FakeTimers }> {
  const upstream = await startWebSocketUpstream();
  defer(() => upstream.close());
  // Timers moved only by the test: no ping and no charging tick runs while it holds the connection.
  const timers = new FakeTimers();
  const traced = await startTracedGateway(petsConfig(upstream.url, { shutdownTimeout }), defer, { timers });
  return { ...traced, upstream, timers };
}

/** Opens a WebSocket tagged `id` and echoes one message through it; answers both sides. */
async function openEchoed(
  { gateway, upstream }: { gateway: { url: string }; upstream: WebSocketUpstream },
  id: string,
) {
  const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), {
    authorization: basicAuth(devKey),
    'x-request-id': id,
  });
  expect(await echo(ws, 'hello')).toBe('hello');
  const upstreamSide = upstream.sockets.at(-1)!;
  const upstreamClosed = new Promise<number>((resolve) => upstreamSide.once('close', resolve));
  return { ws, upstreamClosed };
}

/** The span of WebSocket `id`: a 101, admitted, ended as `how`, with frame bytes each way. */
async function expectSpan(traced: TracedGateway, id: string, how: string): Promise<void> {
  const { line, span } = (await endedOnce(traced, [id])).get(id)!;
  expect(line).toMatchObject({ status: 101, webSocket: how });
  expect(span.attributes).toMatchObject({
    'http.response.status_code': 101,
    'quotagate.form': 'opening',
    'quotagate.decision': 'admitted',
    'quotagate.websocket': how,
  });
  expect(span.attributes['http.request.body.size']).toBeGreaterThan(0);
  expect(span.attributes['http.response.body.size']).toBeGreaterThan(0);
}

describe('the server span of a WebSocket', () => {
  it('ends once when its client vanishes without a close frame (its socket destroyed)', async () => {
    const setup = await setUp();
    const { ws, upstreamClosed } = await openEchoed(setup, 'vanished');
    ws.terminate();
    await upstreamClosed;
    await expectSpan(setup, 'vanished', 'closed');
  });

  it('ends once when its upstream closes it', async () => {
    const setup = await setUp();
    const { ws } = await openEchoed(setup, 'upstream-closed');
    const clientClosed = closed(ws);
    setup.upstream.sockets.at(-1)!.close(1001, 'going away');
    expect(await clientClosed).toEqual({ code: 1001, reason: 'going away' });
    await expectSpan(setup, 'upstream-closed', 'closed');
  });

  it('ends once when the gateway closes with it open (shutdown)', async () => {
    const setup = await setUp();
    const { ws, upstreamClosed } = await openEchoed(setup, 'shut');
    const clientClosed = closed(ws);
    const closing = setup.close();
    // The shutdown's grace period runs out with the WebSocket still open.
    await expect.poll(() => setup.timers.waiting()).toContain(shutdownTimeout);
    setup.timers.advance(shutdownTimeout);
    expect(await clientClosed).toEqual({ code: 1001, reason: 'gateway shutting down' });
    await upstreamClosed;
    await closing;
    await expectSpan(setup, 'shut', 'shutdown');
  });

  it('ends once when the frame that fills a byte restriction passes (quota)', async () => {
    const setup = await setUp();
    await setQuota(
      setup.gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.01, 1, 'minute')] },
      systemQuotaId,
    );
    const { ws, upstreamClosed } = await openEchoed(setup, 'filled');
    const kilobyte = 'k'.repeat(1_000);
    for (let i = 0; i < 5; i += 1) await echo(ws, kilobyte);
    const clientClosed = closed(ws);
    ws.send(kilobyte);
    expect(await clientClosed).toEqual({ code: 1008, reason: 'byte quota exhausted' });
    await upstreamClosed;
    await expectSpan(setup, 'filled', 'quota');
  });
});
