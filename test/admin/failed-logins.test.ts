import { afterEach, describe, expect, it } from 'vitest';
import { FailedLogins } from '../../src/admin/failed-logins.js';
import {
  adminUser,
  memberUser,
  petsConfig,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const clock = { now: 1_800_000_000_000 };
const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

async function start(): Promise<TestGateway> {
  const upstream: TestUpstream = await startUpstream();
  stops.push(() => upstream.close());
  const gateway = await startTestGateway(petsConfig(upstream.url), {}, { clock: () => clock.now });
  stops.push(() => gateway.close());
  return gateway;
}

const asUser = (gateway: TestGateway, username: string, password: string) =>
  fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas`, {
    headers: { authorization: userAuth({ username, password }) },
  });
const loginForm = (gateway: TestGateway, username: string, password: string) =>
  fetch(`${gateway.adminUrl}/api/portal/v1.3/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ username, password }).toString(),
  });

describe('failed admin logins', () => {
  it('make a client wait 15 minutes after 5 wrong passwords for one user, the right one included, by basic auth or the login form', async () => {
    const gateway = await start();
    const statuses: number[] = [];
    for (let i = 0; i < 3; i += 1)
      statuses.push((await asUser(gateway, adminUser.username, `guess-${i}`)).status);
    for (let i = 3; i < 5; i += 1)
      statuses.push((await loginForm(gateway, adminUser.username, `guess-${i}`)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    const refused = await asUser(gateway, adminUser.username, adminUser.password);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('900');
    expect(await refused.json()).toEqual({
      errors: [{ code: 429, message: 'too many failed logins from this client: try again in 900 s' }],
    });
    expect((await loginForm(gateway, adminUser.username, adminUser.password)).status).toBe(429);
    // Another user of the same client is not held up by them.
    expect((await asUser(gateway, memberUser.username, memberUser.password)).status).toBe(200);
    clock.now += 15 * 60_000 - 1_000;
    expect((await asUser(gateway, adminUser.username, adminUser.password)).headers.get('retry-after')).toBe(
      '1',
    );
    clock.now += 1_000;
    expect((await asUser(gateway, adminUser.username, adminUser.password)).status).toBe(200);
  });

  it('forgets the failures of a user who then logs in', async () => {
    const gateway = await start();
    const tries = async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i += 1)
        statuses.push((await asUser(gateway, adminUser.username, 'wrong')).status);
      return statuses;
    };
    expect(await tries()).toEqual([401, 401, 401, 401]);
    expect((await asUser(gateway, adminUser.username, adminUser.password)).status).toBe(200);
    expect(await tries()).toEqual([401, 401, 401, 401]);
    expect((await asUser(gateway, adminUser.username, adminUser.password)).status).toBe(200);
  });

  it('make a client wait after 30 failures whatever the usernames (guessing names), known users included', async () => {
    const gateway = await start();
    const statuses = new Set<number>();
    for (let i = 0; i < 30; i += 1) statuses.add((await asUser(gateway, `user-${i}`, 'password')).status);
    expect([...statuses]).toEqual([401]);
    expect((await asUser(gateway, memberUser.username, memberUser.password)).status).toBe(429);
    expect((await asUser(gateway, 'user-31', 'password')).status).toBe(429);
  });

  it('do not count a request that checks no password (two Authorization fields)', async () => {
    const gateway = await start();
    for (let i = 0; i < 8; i += 1) {
      const answer = await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas`, {
        headers: [
          ['authorization', userAuth(adminUser)],
          ['authorization', userAuth(adminUser)],
        ],
      });
      expect(answer.status).toBe(401);
    }
    expect((await asUser(gateway, adminUser.username, adminUser.password)).status).toBe(200);
  });
});

/** FailedLogins of one failure per user and client, on a clock that stands still; `fail` and `waits` for ann. */
function oneFailureEach(maxKeys: number) {
  const logins = new FailedLogins(() => 0, { perUserAndClient: 1, perClient: 100, windowMs: 1000, maxKeys });
  return {
    fail: (peer: string) => logins.attempt(peer, 'ann', () => Promise.resolve(null)),
    waits: (peer: string) =>
      logins
        .attempt(peer, 'ann', () => Promise.resolve('ok'))
        .then(
          () => false,
          () => true,
        ),
  };
}

describe('the client a failed login counts against', () => {
  it('is an IPv4 address (mapped or not), or the /64 of an IPv6 address', async () => {
    const { fail, waits } = oneFailureEach(100);
    await fail('192.0.2.1');
    expect(await waits('::ffff:192.0.2.1')).toBe(true);
    expect(await waits('192.0.2.2')).toBe(false);
    await fail('2001:db8:1:2::1');
    expect(await waits('2001:db8:1:2:ffff::9')).toBe(true);
    expect(await waits('2001:0db8:0001:0002:0:0:0:7')).toBe(true);
    expect(await waits('2001:db8:1:3::1')).toBe(false);
  });

  it('is forgotten, the stalest first, beyond maxKeys', async () => {
    const { fail, waits } = oneFailureEach(4);
    await fail('192.0.2.1');
    await fail('192.0.2.2');
    await fail('192.0.2.3');
    expect(await waits('192.0.2.2')).toBe(true);
    expect(await waits('192.0.2.1')).toBe(false);
  });
});
