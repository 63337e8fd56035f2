import { describe, expect, it } from 'vitest';
import {
  adminUser,
  applicationDefaultQuotaId,
  memberUser,
  petsConfig,
  startTestGateway,
  systemQuotaId,
  throttle,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * What a client written for Axway API Manager does, call by call as apim-cli makes them (its session
 * login, the v1.4 base path, trailing slashes, application quotas of restrictions alone, the filtered
 * applications list), against a real gateway on 127.0.0.1.
 */
const mobile = {
  id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f',
  name: 'Mobile app',
  description: 'iOS and Android',
  apikey_development: 'app-key-0123456789abcdef0123456789',
};
const kiosk = {
  id: '6e5d4c3b-2a19-4f8e-9d7c-6b5a4f3e2d1c',
  name: 'Kiosk',
  apikey_development: 'other-key-0123456789abcdef01234567',
};

const defer = cleanupAfterEach();

async function start(): Promise<{ gateway: TestGateway; config: Record<string, unknown> }> {
  const config = petsConfig('http://127.0.0.1:9/pets', { applications: [mobile, kiosk] });
  const gateway = await startTestGateway(config);
  defer(() => gateway.close());
  return { gateway, config };
}

interface Session {
  cookie: string;
  csrf: string;
}

async function login(
  gateway: TestGateway,
  user: { username: string; password: string } = adminUser,
): Promise<Session> {
  const res = await fetch(`${gateway.adminUrl}/api/portal/v1.4/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ username: user.username, password: user.password }).toString(),
  });
  expect(res.status).toBe(303);
  expect(res.headers.get('location')).toBe('/api/portal/v1.3/currentuser');
  const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
  expect(cookie).toMatch(/^APIMANAGERSESSION=[\w-]{40,}$/);
  expect(res.headers.get('set-cookie')).toContain('HttpOnly; SameSite=Strict');
  return { cookie, csrf: res.headers.get('csrf-token')! };
}

const call = (gateway: TestGateway, session: Session | null, method: string, path: string, body?: unknown) =>
  fetch(`${gateway.adminUrl}/api/portal/v1.4${path}`, {
    method,
    headers: {
      ...(session ? { cookie: session.cookie, 'csrf-token': session.csrf } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

describe('Axway API Manager clients (apim-cli)', () => {
  it('logs in with a form, then reads and writes an application quota the way apim-cli does', async () => {
    const { gateway } = await start();
    const session = await login(gateway);
    const me = await call(gateway, session, 'GET', '/currentuser');
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ loginName: 'ann', role: 'admin' });
    expect(me.headers.get('csrf-token')).toBe(session.csrf);

    const found = await call(gateway, session, 'GET', '/applications?field=name&op=eq&value=Mobile+app');
    expect(await found.json()).toEqual([
      {
        id: mobile.id,
        name: 'Mobile app',
        description: 'iOS and Android',
        enabled: true,
        state: 'approved',
        declared: true,
      },
    ]);

    // No quota of its own yet: the Application Default, which says system.
    const before = await call(gateway, session, 'GET', `/applications/${mobile.id}/quota/`);
    expect(before.status).toBe(200);
    expect(await before.json()).toMatchObject({ id: applicationDefaultQuotaId, system: true });

    // apim-cli posts the restrictions alone.
    const restrictions = [throttle(100, 1, 'hour')];
    const created = await call(gateway, session, 'POST', `/applications/${mobile.id}/quota`, {
      system: false,
      restrictions,
    });
    expect(created.status).toBe(201);
    const own = (await created.json()) as { id: string };
    expect(own).toMatchObject({
      type: 'APPLICATION',
      name: 'Mobile app quota',
      description: '',
      system: false,
    });

    const after = (await (
      await call(gateway, session, 'GET', `/applications/${mobile.id}/quota/`)
    ).json()) as {
      id: string;
      restrictions: unknown[];
    };
    expect(after.id).toBe(own.id);
    expect(after.restrictions).toEqual([
      { api: '*', method: '*', type: 'throttle', config: { messages: '100', per: '1', period: 'hour' } },
    ]);

    const updated = await call(gateway, session, 'PUT', `/applications/${mobile.id}/quota`, {
      system: false,
      restrictions: [throttle(50, 1, 'hour')],
    });
    expect(updated.status).toBe(200);
    expect(await updated.json()).toMatchObject({ id: own.id, name: 'Mobile app quota' });

    // An empty set of restrictions is apim-cli's DELETE.
    expect((await call(gateway, session, 'DELETE', `/applications/${mobile.id}/quota`)).status).toBe(204);
    expect((await call(gateway, session, 'DELETE', '/login')).status).toBe(204);
    expect((await call(gateway, session, 'GET', '/currentuser')).status).toBe(401);
  });

  it('gives an application a quota on PUT when it has none (201), but not under If-Match (412)', async () => {
    const { gateway } = await start();
    const headers = { authorization: userAuth(adminUser), 'content-type': 'application/json' };
    const url = `${gateway.adminUrl}/api/portal/v1.3/applications/${kiosk.id}/quota/`;
    const body = JSON.stringify({ restrictions: [throttle(5, 1, 'minute')] });
    expect((await fetch(url, { method: 'PUT', headers: { ...headers, 'if-match': '*' }, body })).status).toBe(
      412,
    );
    const created = await fetch(url, { method: 'PUT', headers, body });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({
      name: 'Kiosk quota',
      application: { id: kiosk.id, name: 'Kiosk' },
    });
    expect((await fetch(url, { method: 'PUT', headers, body })).status).toBe(200);
  });

  it('reads and replaces the well-known quotas on the v1.4 path, with and without a trailing slash', async () => {
    const { gateway } = await start();
    const session = await login(gateway);
    const system = (await (
      await call(gateway, session, 'GET', `/quotas/${systemQuotaId}/`)
    ).json()) as Record<string, unknown>;
    expect(system).toMatchObject({ id: systemQuotaId, type: 'API', system: true });
    const replaced = await call(gateway, session, 'PUT', `/quotas/${systemQuotaId}`, {
      ...system,
      restrictions: [throttle(1000, 1, 'second')],
    });
    expect(replaced.status).toBe(200);
    expect(((await replaced.json()) as { restrictions: unknown[] }).restrictions).toHaveLength(1);
  });

  it('filters the applications list by name (eq, like), and says which filters it does not know', async () => {
    const { gateway } = await start();
    const session = await login(gateway);
    const names = async (query: string) =>
      (
        (await (await call(gateway, session, 'GET', `/applications${query}`)).json()) as Array<{
          name: string;
        }>
      ).map((application) => application.name);
    expect(await names('')).toEqual(['project', 'Mobile app', 'Kiosk']);
    expect(await names('?field=name&op=like&value=*MOB*')).toEqual(['Mobile app']);
    expect(await names('?field=name&op=eq&value=kiosk')).toEqual([]);
    expect(await names(`?field=id&op=eq&value=${kiosk.id.toUpperCase()}`)).toEqual(['Kiosk']);
    const unknown = await call(gateway, session, 'GET', '/applications?field=orgid&op=eq&value=1');
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({
      errors: [
        expect.objectContaining({
          message:
            "field: 'orgid' is not a field applications are filtered by here (name, id, state, enabled)",
        }),
      ],
    });
    expect((await call(gateway, session, 'GET', `/applications/${mobile.id}/`)).status).toBe(200);
    expect((await call(gateway, session, 'GET', '/applications/nope')).status).toBe(404);
  });

  it('refuses a session request that changes something without its CSRF-Token, a wrong password, and forms elsewhere', async () => {
    const { gateway } = await start();
    const session = await login(gateway);
    const withoutToken = await fetch(`${gateway.adminUrl}/api/portal/v1.3/applications/${mobile.id}/quota`, {
      method: 'POST',
      headers: { cookie: session.cookie, 'content-type': 'application/json' },
      body: JSON.stringify({ restrictions: [] }),
    });
    expect(withoutToken.status).toBe(403);
    const wrong = await fetch(`${gateway.adminUrl}/api/portal/v1.3/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'username=ann&password=guess',
    });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    const form = await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas`, {
      method: 'POST',
      headers: { authorization: userAuth(adminUser), 'content-type': 'application/x-www-form-urlencoded' },
      body: 'type=API&name=x',
    });
    expect(form.status).toBe(415);
    // A member's session may read, and may not write, as with basic credentials.
    const member = await login(gateway, memberUser);
    expect((await call(gateway, member, 'GET', '/currentuser')).status).toBe(200);
    expect(
      (await call(gateway, member, 'POST', `/applications/${mobile.id}/quota`, { restrictions: [] })).status,
    ).toBe(403);
  });

  it("ends the sessions of a user whose password a reload changed, and keeps the others'", async () => {
    const { gateway, config } = await start();
    const [ann, max] = [await login(gateway), await login(gateway, memberUser)];
    const changed = {
      ...config,
      admin: {
        ...(config.admin as object),
        users: [adminUser, { ...memberUser, password: 'a-new-password-0' }],
      },
    };
    expect((await gateway.reloadWith(changed)).applied).toBe(true);
    expect((await call(gateway, max, 'GET', '/currentuser')).status).toBe(401);
    expect((await call(gateway, ann, 'GET', '/currentuser')).status).toBe(200);
  });

  it("lets a user hold ten sessions: logging in again and again ends that user's oldest, never another's", async () => {
    const { gateway } = await start();
    const ann = await login(gateway);
    const first = await login(gateway, memberUser);
    for (let i = 0; i < 10; i += 1) await login(gateway, memberUser);
    expect((await call(gateway, first, 'GET', '/currentuser')).status).toBe(401);
    expect((await call(gateway, ann, 'GET', '/currentuser')).status).toBe(200);
  });

  it('ends the sessions of an administrator a reload made a member: the session cannot keep the old rights', async () => {
    const { gateway, config } = await start();
    const ann = await login(gateway);
    expect(
      (await call(gateway, ann, 'POST', `/applications/${mobile.id}/quota`, { restrictions: [] })).status,
    ).toBe(201);
    const demoted = {
      ...config,
      admin: { ...(config.admin as object), users: [{ ...adminUser, role: 'member' }, memberUser] },
    };
    expect((await gateway.reloadWith(demoted)).applied).toBe(true);
    expect((await call(gateway, ann, 'DELETE', `/applications/${mobile.id}/quota`)).status).toBe(401);
    const again = await login(gateway);
    expect((await call(gateway, again, 'DELETE', `/applications/${mobile.id}/quota`)).status).toBe(403);
  });

  it("binds the CSRF-Token to its own session: another session's token changes nothing", async () => {
    const { gateway } = await start();
    const [ann, other] = [await login(gateway), await login(gateway)];
    const crossed = { cookie: ann.cookie, csrf: other.csrf };
    expect(
      (await call(gateway, crossed, 'POST', `/applications/${mobile.id}/quota`, { restrictions: [] })).status,
    ).toBe(403);
    expect(
      (await call(gateway, ann, 'POST', `/applications/${mobile.id}/quota`, { restrictions: [] })).status,
    ).toBe(201);
  });

  it('ends the sessions of a user a reload removed', async () => {
    const { gateway, config } = await start();
    const member = await login(gateway, memberUser);
    expect((await call(gateway, member, 'GET', '/currentuser')).status).toBe(200);
    const withoutMember = { ...config, admin: { ...(config.admin as object), users: [adminUser] } };
    expect((await gateway.reloadWith(withoutMember)).applied).toBe(true);
    expect((await call(gateway, member, 'GET', '/currentuser')).status).toBe(401);
  });

  it('refuses a login another site posts (login CSRF), and takes those of the console and of clients', async () => {
    const { gateway } = await start();
    const host = new URL(gateway.adminUrl).host;
    const post = (headers: Record<string, string>) =>
      fetch(`${gateway.adminUrl}/api/portal/v1.3/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams({
          username: memberUser.username,
          password: memberUser.password,
        }).toString(),
      });
    const crossSite: Array<Record<string, string>> = [
      { origin: 'http://evil.test' },
      { origin: `http://${host}.evil.test` },
      { origin: 'null' },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site', origin: `http://${host}` },
    ];
    for (const headers of crossSite) {
      const refused = await post(headers);
      expect(refused.status, JSON.stringify(headers)).toBe(403);
      expect(refused.headers.get('set-cookie'), JSON.stringify(headers)).toBeNull();
      expect(await refused.text()).toContain('a login must come from this admin port itself');
    }
    const sameSite: Array<Record<string, string>> = [
      {},
      { origin: `http://${host}`, 'sec-fetch-site': 'same-origin' },
    ];
    for (const headers of sameSite) {
      expect((await post(headers)).status, JSON.stringify(headers)).toBe(303);
    }
  });

  it('takes a request with two session cookies as having none (a planted one must not win)', async () => {
    const { gateway } = await start();
    const ann = await login(gateway);
    const max = await login(gateway, memberUser);
    const both = await fetch(`${gateway.adminUrl}/api/portal/v1.3/currentuser`, {
      headers: { cookie: `${max.cookie}; ${ann.cookie}` },
    });
    expect(both.status).toBe(401);
    expect((await call(gateway, ann, 'GET', '/currentuser')).status).toBe(200);
  });
});
