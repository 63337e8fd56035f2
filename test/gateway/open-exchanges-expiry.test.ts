import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import {
  rsaKey,
  signToken,
  startJwksServer,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwks-server.js';
import { accessLines, petsConfig, startTestGateway } from '../helpers/test-gateway.js';
import { closed, echo, mustOpen, mustRefuse, startWebSocketUpstream, wsUrl } from '../helpers/websockets.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

/**
 * An open exchange is authenticated once, when it opens; the credentials it opened with are checked
 * again on the tick of the open exchanges. A JWT's stop holding at its exp: a WebSocket opened with one
 * ends then, as one opened with a revoked key does, on a real JWKS and an injected clock.
 */
const defer = cleanupAfterEach();
const upstream = useSuiteUpstream(() => startWebSocketUpstream());

const issuer = 'https://idp.example/realms/test';
const audience = 'pets-api';
let key: SigningKey;
let jwks: JwksServer;
beforeAll(async () => {
  key = await rsaKey('key-1');
  jwks = await startJwksServer([key.publicJwk]);
});
afterAll(() => jwks.close());

/** A gateway of the jwt scheme whose authenticators' clock and timers the test moves. */
async function jwtGateway(jwt: Record<string, unknown> = {}) {
  const clock = { now: Date.now() };
  const timers = new FakeTimers();
  const gateway = await startTestGateway(
    petsConfig(upstream().url, {
      APIKeyAuthType: 'jwt',
      jwt: { jwksUri: jwks.url, issuer, audience, ...jwt },
    }),
    {},
    { now: () => clock.now, timers },
  );
  defer(() => gateway.close());
  /** The second the tokens' lifetimes count from. */
  const start = Math.floor(clock.now / 1000);
  const bearerFor = async (secondsLeft: number) => ({
    authorization: `Bearer ${await signToken(key, {
      iss: issuer,
      aud: audience,
      sub: 'user-1',
      client_id: 'app-a',
      exp: start + secondsLeft,
    })}`,
  });
  /** Moves the clock to `seconds` after the start, and the timers on to the next tick. */
  const tickAt = (seconds: number) => {
    clock.now = (start + seconds) * 1000;
    timers.advance(1_000);
  };
  return { gateway, tickAt, bearerFor };
}

describe('a WebSocket opened with a JWT', () => {
  it('closes with 1008 on the tick at its exp, and not a tick before', async () => {
    const { gateway, tickAt, bearerFor } = await jwtGateway({ clockTolerance: 0 });
    const expiring = await bearerFor(60);
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), expiring);
    const lasting = (await mustOpen(wsUrl(gateway.url, '/pets/1'), await bearerFor(3_600))).ws;
    const ended = closed(ws);
    // A second before exp: the token still holds.
    tickAt(59);
    expect(await echo(ws, 'before exp')).toBe('before exp');
    tickAt(60);
    expect(await ended).toEqual({ code: 1008, reason: 'credentials expired' });
    expect(await echo(lasting, 'its token holds')).toBe('its token holds');
    await expect
      .poll(() => accessLines(gateway).find((line) => line.status === 101 && line.webSocket !== null))
      .toMatchObject({ webSocket: 'expired', subject: 'user-1' });
    // And the token opens no new one.
    expect((await mustRefuse(wsUrl(gateway.url, '/pets/1'), expiring)).status).toBe(401);
    lasting.close();
  });

  it('holds until exp and jwt.clockTolerance have passed, as a new request with it would', async () => {
    const { gateway, tickAt, bearerFor } = await jwtGateway({ clockTolerance: 30 });
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), await bearerFor(10));
    const ended = closed(ws);
    tickAt(39);
    expect(await echo(ws, 'within the tolerance')).toBe('within the tolerance');
    tickAt(40);
    expect((await ended).code).toBe(1008);
  });
});
