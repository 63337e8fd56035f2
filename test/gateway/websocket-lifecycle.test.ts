import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import {
  accessLines,
  adminCall,
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { closed, echo, mustOpen, mustRefuse, startWebSocketUpstream, wsUrl } from '../helpers/websockets.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

const defer = cleanupAfterEach();
const upstream = useSuiteUpstream(() => startWebSocketUpstream());

const withKey = { authorization: basicAuth(devKey) };

async function gatewayWith(
  overrides: Record<string, unknown> = {},
): Promise<{ gateway: TestGateway; timers: FakeTimers }> {
  const timers = new FakeTimers();
  const gateway = await startTestGateway(petsConfig(upstream().url, overrides), {}, { timers });
  defer(() => gateway.close());
  return { gateway, timers };
}

/** An application made through the admin API, with a key: its id, the key's id and the key. */
async function applicationWithKey(gateway: TestGateway): Promise<{ id: string; keyId: string; key: string }> {
  const app = await adminCall(gateway, 'POST', '/applications', { name: 'Chat client' });
  expect(app.status).toBe(201);
  const { id } = (await app.json()) as { id: string };
  const key = await adminCall(gateway, 'POST', `/applications/${id}/apikeys`, {});
  expect(key.status).toBe(201);
  const made = (await key.json()) as { id: string; key: string };
  return { id, keyId: made.id, key: made.key };
}

describe('an open WebSocket and the credentials that opened it', () => {
  it('closes with 1008 on the next tick once its key is revoked, and leaves the others open', async () => {
    const { gateway, timers } = await gatewayWith();
    const { id, keyId, key } = await applicationWithKey(gateway);
    const revoked = (await mustOpen(wsUrl(gateway.url, '/pets/1'), { authorization: basicAuth(key) })).ws;
    const other = (await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey)).ws;
    const ended = closed(revoked);
    timers.advance(1_000);
    expect(await echo(revoked, 'before')).toBe('before');
    expect((await adminCall(gateway, 'DELETE', `/applications/${id}/apikeys/${keyId}`)).status).toBe(204);
    timers.advance(1_000);
    expect(await ended).toEqual({ code: 1008, reason: 'credentials revoked' });
    expect(await echo(other, 'still open')).toBe('still open');
    await expect
      .poll(() => accessLines(gateway).find((line) => line.status === 101))
      .toMatchObject({ webSocket: 'revoked', application: 'Chat client' });
    // And the key opens no new one.
    expect((await mustRefuse(wsUrl(gateway.url, '/pets/1'), { authorization: basicAuth(key) })).status).toBe(
      401,
    );
    other.close();
  });

  it('closes with 1008 on the next tick once its application is deleted', async () => {
    const { gateway, timers } = await gatewayWith();
    const { id, key } = await applicationWithKey(gateway);
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), { authorization: basicAuth(key) });
    const ended = closed(ws);
    expect((await adminCall(gateway, 'DELETE', `/applications/${id}`)).status).toBe(204);
    timers.advance(1_000);
    expect(await ended).toEqual({ code: 1008, reason: 'credentials revoked' });
  });
});

describe('an open WebSocket across a reload and a shutdown', () => {
  it('keeps an open WebSocket on the config it opened under when a reload refuses upgrades', async () => {
    const { gateway } = await gatewayWith();
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    const [api] = petsConfig(upstream().url).apis as Array<Record<string, unknown>>;
    const outcome = await gateway.reloadWith(
      petsConfig(upstream().url, { apis: [{ ...api, websocket: false }] }),
    );
    expect(outcome).toMatchObject({ applied: true });
    expect((await mustRefuse(wsUrl(gateway.url, '/pets/1'), withKey)).status).toBe(400);
    expect(await echo(ws, 'on the old config')).toBe('on the old config');
    ws.close();
    await closed(ws);
  });

  it('lets an open WebSocket run through the shutdown grace period, then closes it with 1001', async () => {
    const { gateway, timers } = await gatewayWith({ shutdownTimeout: 300 });
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    const ended = closed(ws);
    let stopped = false;
    const stopping = gateway.running.close().then(() => {
      stopped = true;
    });
    // The grace period has begun: its timer is set, the tick's (every second) beside it.
    await expect.poll(() => timers.waiting()).toContain(300);
    timers.advance(299);
    expect(await echo(ws, 'during the grace period')).toBe('during the grace period');
    expect(stopped).toBe(false);
    expect(ws.readyState).toBe(ws.OPEN);
    timers.advance(1);
    expect(await ended).toEqual({ code: 1001, reason: 'gateway shutting down' });
    await stopping;
    expect(accessLines(gateway).find((line) => line.status === 101)).toMatchObject({ webSocket: 'shutdown' });
  });

  it('finishes the shutdown as soon as the last WebSocket closes within the grace period', async () => {
    const { gateway } = await gatewayWith({ shutdownTimeout: 60_000 });
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    const stopping = gateway.running.close();
    ws.close(1000);
    await stopping;
    expect(accessLines(gateway).find((line) => line.status === 101)).toMatchObject({ webSocket: 'closed' });
  });
});
