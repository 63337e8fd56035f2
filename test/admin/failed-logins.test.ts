import { describe, expect, it } from 'vitest';
import { FailedLogins } from '../../src/admin/failed-logins.js';
import { postLoginForm, useAdminLoginGateways } from '../helpers/admin-logins.js';
import { request } from '../helpers/raw-http.js';
import { adminUser, memberUser, userAuth, type TestGateway } from '../helpers/test-gateway.js';

const clock = { now: 1_800_000_000_000 };
const start = useAdminLoginGateways(() => clock.now);

const asUser = (gateway: TestGateway, username: string, password: string) =>
  fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas`, {
    headers: { authorization: userAuth({ username, password }) },
  });
/** A request of its own connection (real sockets, all from 127.0.0.1), by basic auth or the login form. */
const basic = (gateway: TestGateway, username: string, password: string) =>
  request(gateway.adminUrl, {
    path: '/api/portal/v1.3/quotas',
    headers: { authorization: userAuth({ username, password }) },
  }).then((answer) => answer.status);
const form = (gateway: TestGateway, username: string, password: string) =>
  request(gateway.adminUrl, {
    method: 'POST',
    path: '/api/portal/v1.3/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ username, password }).toString(),
  }).then((answer) => answer.status);

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;
const guesses = (n: number) => Array.from({ length: n }, (_, i) => `guess-${i}`);

describe('failed admin logins', () => {
  it('make a client wait 15 minutes after 5 wrong passwords for one user, the right one included, by basic auth or the login form', async () => {
    const gateway = await start();
    const statuses: number[] = [];
    for (let i = 0; i < 3; i += 1)
      statuses.push((await asUser(gateway, adminUser.username, `guess-${i}`)).status);
    for (let i = 3; i < 5; i += 1)
      statuses.push((await postLoginForm(gateway, adminUser.username, `guess-${i}`)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    const refused = await asUser(gateway, adminUser.username, adminUser.password);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('900');
    expect(await refused.json()).toEqual({
      errors: [{ code: 429, message: 'too many failed logins from this client: try again in 900 s' }],
    });
    expect((await postLoginForm(gateway, adminUser.username, adminUser.password)).status).toBe(429);
    // Another user of the same client is not held up by them.
    expect((await asUser(gateway, memberUser.username, memberUser.password)).status).toBe(200);
    clock.now += 15 * 60_000 - 1_000;
    expect((await asUser(gateway, adminUser.username, adminUser.password)).headers.get('retry-after')).toBe(
      '1',
    );
    clock.now += 1_000;
    expect((await asUser(gateway, adminUser.username, adminUser.password)).status).toBe(200);
  });

  it("count the failures around a successful login all the same: a guesser sharing the real user's address gets 5 in all", async () => {
    const gateway = await start();
    const tries = async (n: number) => {
      const statuses: number[] = [];
      for (let i = 0; i < n; i += 1)
        statuses.push((await asUser(gateway, adminUser.username, `wrong-${i}`)).status);
      return statuses;
    };
    expect(await tries(4)).toEqual([401, 401, 401, 401]);
    expect((await asUser(gateway, adminUser.username, adminUser.password)).status).toBe(200);
    expect((await postLoginForm(gateway, adminUser.username, adminUser.password)).status).toBe(303);
    expect(await tries(2)).toEqual([401, 429]);
    expect((await asUser(gateway, adminUser.username, adminUser.password)).status).toBe(429);
  });

  it('make a client wait after 30 failures whatever the usernames (guessing names), known users included', async () => {
    const gateway = await start();
    const statuses = new Set<number>();
    for (let i = 0; i < 30; i += 1) statuses.add((await asUser(gateway, `user-${i}`, 'password')).status);
    expect([...statuses]).toEqual([401]);
    expect((await asUser(gateway, memberUser.username, memberUser.password)).status).toBe(429);
    expect((await asUser(gateway, 'user-31', 'password')).status).toBe(429);
  });

  it('do not count a request that checks no password (two Authorization fields, an empty password)', async () => {
    const gateway = await start();
    for (let i = 0; i < 8; i += 1) {
      const answer = await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas`, {
        headers: [
          ['authorization', userAuth(adminUser)],
          ['authorization', userAuth(adminUser)],
        ],
      });
      expect(answer.status).toBe(401);
      expect((await asUser(gateway, adminUser.username, '')).status).toBe(401);
    }
    expect((await asUser(gateway, adminUser.username, adminUser.password)).status).toBe(200);
  });
});

describe('failed admin logins, sent all at once', () => {
  it('check at most 5 passwords of one user from one client by basic auth; the others are 429 before any check, and the right one after them too', async () => {
    const gateway = await start({ hashed: true });
    const statuses = await Promise.all(guesses(40).map((guess) => basic(gateway, adminUser.username, guess)));
    expect(count(statuses, 401)).toBe(5);
    expect(count(statuses, 429)).toBe(35);
    // Each password checked and found wrong writes its audit line: 5 checks ran.
    const failures = gateway.logs.filter((line) => line.audit === true && line.outcome === 'failure');
    expect(failures).toHaveLength(5);
    expect(await basic(gateway, adminUser.username, adminUser.password)).toBe(429);
    expect(await form(gateway, adminUser.username, adminUser.password)).toBe(429);
  });

  it('check at most 5 passwords of one user from one client by the login form and basic auth together', async () => {
    const gateway = await start({ hashed: true });
    const statuses = await Promise.all(
      guesses(40).map((guess, i) => (i % 2 ? form : basic)(gateway, adminUser.username, guess)),
    );
    expect(count(statuses, 401)).toBe(5);
    expect(count(statuses, 429)).toBe(35);
    expect(await form(gateway, adminUser.username, adminUser.password)).toBe(429);
  });

  it('check at most 5 wrong passwords when the right one is among 40 wrong ones', async () => {
    const gateway = await start({ hashed: true });
    const [right, ...wrong] = await Promise.all([
      basic(gateway, adminUser.username, adminUser.password),
      ...guesses(40).map((guess) => basic(gateway, adminUser.username, guess)),
    ]);
    const checked = count(wrong, 401);
    expect(checked + count(wrong, 429)).toBe(40);
    // Either the right one came after 5 checks (429), or it was among them and gave its place back,
    // which a guess still on its way may have taken.
    expect(right === 200 ? [4, 5] : [5]).toContain(checked);
    expect(right === 200 || right === 429).toBe(true);
    expect(await basic(gateway, adminUser.username, 'one more')).toBe(checked === 5 ? 429 : 401);
    expect(await basic(gateway, adminUser.username, adminUser.password)).toBe(429);
  });

  it('check at most 30 passwords from one client whatever the usernames', async () => {
    const gateway = await start({ hashed: true });
    const statuses = await Promise.all(guesses(45).map((name) => form(gateway, name, 'password')));
    expect(count(statuses, 401)).toBe(30);
    expect(count(statuses, 429)).toBe(15);
    expect(await basic(gateway, memberUser.username, memberUser.password)).toBe(429);
  });

  it('give the reservation of a successful check back: it leaves room for the next check', async () => {
    const gateway = await start({ hashed: true });
    for (const name of guesses(29)) expect(await basic(gateway, name, 'password')).toBe(401);
    // The 30th check of this client succeeds: it must not hold the 30th place.
    expect(await basic(gateway, memberUser.username, memberUser.password)).toBe(200);
    expect(await basic(gateway, adminUser.username, adminUser.password)).toBe(200);
    expect(await basic(gateway, 'one-more', 'password')).toBe(401);
    expect(await basic(gateway, 'yet-another', 'password')).toBe(429);
  });

  it('check the right password once for many requests that bring it at once, and let them all in', async () => {
    const gateway = await start({ hashed: true });
    const statuses = await Promise.all(
      Array.from({ length: 20 }, () => basic(gateway, adminUser.username, adminUser.password)),
    );
    expect(statuses).toEqual(new Array(20).fill(200));
  });
});

/** FailedLogins of one failure per user and client, on a clock that stands still; `fail` and `waits` for ann. */
function oneFailureEach(maxKeys: number) {
  const logins = new FailedLogins(() => 0, { perUserAndClient: 1, perClient: 100, windowMs: 1000, maxKeys });
  return {
    fail: (peer: string) =>
      logins.attempt(peer, 'ann', (reserve) => {
        reserve();
        return Promise.resolve(null);
      }),
    waits: (peer: string) =>
      logins
        .attempt(peer, 'ann', (reserve) => {
          reserve();
          return Promise.resolve('ok');
        })
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
