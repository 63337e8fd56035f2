import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { postLoginForm, useAdminLoginGateways } from '../helpers/admin-logins.js';
import { getPetThrottle, mobileAppId, quotaDto } from '../helpers/quota-api-client.js';
import { adminUser, memberUser, userAuth, type TestGateway } from '../helpers/test-gateway.js';

const useGateway = useAdminLoginGateways(() => 1_800_000_000_000);
/** Passwords hashed in the config, so that only the audit lines themselves can keep one out of the log. */
const start = () =>
  useGateway({
    hashed: true,
    config: {
      applications: [
        { id: mobileAppId, name: 'Mobile', apikey_development: 'mobile-dev-key-0123456789abcdef' },
      ],
    },
  });

interface Call {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

/** Calls `/api/portal/v1.3<path>` as `user` (the admin unless given) with a JSON body. */
async function call(
  gateway: TestGateway,
  method: string,
  path: string,
  body?: unknown,
  user: { username: string; password: string } = adminUser,
): Promise<Call> {
  const answer = await fetch(`${gateway.adminUrl}/api/portal/v1.3${path}`, {
    method,
    redirect: 'manual',
    headers: { authorization: userAuth(user), 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await answer.text();
  return { status: answer.status, headers: answer.headers, body: text ? JSON.parse(text) : {} };
}

const auditLines = (gateway: TestGateway) => gateway.logs.filter((line) => line.audit === true);
const byAdmin = { actor: adminUser.username, role: 'admin', client: '127.0.0.1' };

/** The one shape of every audit line. */
const auditFields = ['action', 'actor', 'client', 'outcome', 'role', 'status', 'target'];

describe('the admin audit trail', () => {
  it('writes one line for each change of a quota: who, from where, what, the ids and the outcome', async () => {
    const gateway = await start();
    const created = await call(gateway, 'POST', '/quotas', quotaDto());
    const id = created.body.id as string;
    expect((await call(gateway, 'PUT', `/quotas/${id.toUpperCase()}`, quotaDto({ name: 'B' }))).status).toBe(
      200,
    );
    expect((await call(gateway, 'DELETE', `/quotas/${id}`)).status).toBe(204);
    expect((await call(gateway, 'GET', `/quotas`)).status).toBe(200);
    expect(auditLines(gateway)).toEqual([
      expect.objectContaining({
        ...byAdmin,
        action: 'createQuota',
        target: { quota: id },
        outcome: 'success',
        status: 201,
      }),
      expect.objectContaining({
        ...byAdmin,
        action: 'updateQuota',
        target: { quota: id },
        outcome: 'success',
        status: 200,
      }),
      expect.objectContaining({
        ...byAdmin,
        action: 'deleteQuota',
        target: { quota: id },
        outcome: 'success',
        status: 204,
      }),
    ]);
    for (const line of auditLines(gateway)) {
      expect(Object.keys(line)).toEqual(expect.arrayContaining(auditFields));
      expect(line).toMatchObject({ plane: 'admin', level: 30 });
    }
  });

  it('writes a line for a refused change too, with the role that asked', async () => {
    const gateway = await start();
    expect((await call(gateway, 'POST', '/quotas', quotaDto(), memberUser)).status).toBe(403);
    expect((await call(gateway, 'DELETE', `/quotas/00000000-0000-0000-0000-000000000000`)).status).toBe(403);
    expect(auditLines(gateway)).toEqual([
      expect.objectContaining({
        actor: memberUser.username,
        role: 'member',
        action: 'createQuota',
        target: {},
        outcome: 'refused',
        status: 403,
        level: 40,
      }),
      expect.objectContaining({
        ...byAdmin,
        action: 'deleteQuota',
        target: { quota: '00000000-0000-0000-0000-000000000000' },
        outcome: 'refused',
        status: 403,
      }),
    ]);
  });

  it('writes one line for each change of an application and of its keys, and never a key', async () => {
    const gateway = await start();
    const app = await call(gateway, 'POST', '/applications', { name: 'Partner' });
    const id = app.body.id as string;
    const key = await call(gateway, 'POST', `/applications/${id}/apikeys`, { environment: 'production' });
    const keyId = key.body.id as string;
    expect(key.body.key).toEqual(expect.any(String));
    expect(
      (await call(gateway, 'PUT', `/applications/${id}/apikeys/${keyId}`, { enabled: false })).status,
    ).toBe(200);
    expect((await call(gateway, 'DELETE', `/applications/${id}/apikeys/${keyId}`)).status).toBe(204);
    expect((await call(gateway, 'PUT', `/applications/${id}`, { name: 'Partner 2' })).status).toBe(200);
    expect(
      (await call(gateway, 'POST', `/applications/${id}/quota`, { restrictions: [getPetThrottle()] })).status,
    ).toBe(201);
    const own = (await call(gateway, 'GET', `/applications/${id}/quota`)).body.id as string;
    expect((await call(gateway, 'DELETE', `/applications/${id}`)).status).toBe(204);
    const application = { application: id };
    expect(auditLines(gateway).map(({ action, target, status }) => ({ action, target, status }))).toEqual([
      { action: 'createApplication', target: application, status: 201 },
      {
        action: 'createApiKey',
        target: { ...application, key: keyId, environment: 'production' },
        status: 201,
      },
      { action: 'updateApiKey', target: { ...application, key: keyId, enabled: false }, status: 200 },
      { action: 'deleteApiKey', target: { ...application, key: keyId }, status: 204 },
      { action: 'updateApplication', target: application, status: 200 },
      { action: 'createApplicationQuota', target: { ...application, quota: own }, status: 201 },
      { action: 'deleteApplication', target: { ...application, quota: own }, status: 204 },
    ]);
    expect(auditLines(gateway).every((line) => line.actor === adminUser.username)).toBe(true);
    expect(gateway.rawLogs()).not.toContain(key.body.key as string);
  });

  it("writes a line for an application's own quota, and for putting it on a plan and taking it off", async () => {
    const gateway = await start();
    const plan = (await call(gateway, 'POST', '/quotas', quotaDto({ type: 'APPLICATION', name: 'Gold' })))
      .body.id as string;
    const onApp = `/applications/${mobileAppId}/quota`;
    expect((await call(gateway, 'PUT', onApp, { restrictions: [getPetThrottle()] })).status).toBe(201);
    const own = (await call(gateway, 'GET', onApp)).body.id as string;
    expect((await call(gateway, 'PUT', onApp, { restrictions: [] })).status).toBe(200);
    expect((await call(gateway, 'DELETE', onApp)).status).toBe(204);
    expect((await call(gateway, 'PUT', onApp, { plan })).status).toBe(200);
    expect((await call(gateway, 'DELETE', onApp)).status).toBe(204);
    expect((await call(gateway, 'POST', onApp, { plan })).status).toBe(201);
    expect((await call(gateway, 'DELETE', `/quotas/${plan}`)).status).toBe(409);
    const application = { application: mobileAppId };
    expect(auditLines(gateway).map(({ action, target, status }) => ({ action, target, status }))).toEqual([
      { action: 'createQuota', target: { quota: plan }, status: 201 },
      { action: 'updateApplicationQuota', target: { ...application, quota: own }, status: 201 },
      { action: 'updateApplicationQuota', target: { ...application, quota: own }, status: 200 },
      { action: 'deleteApplicationQuota', target: { ...application, quota: own }, status: 204 },
      { action: 'updateApplicationQuota', target: { ...application, plan }, status: 200 },
      { action: 'deleteApplicationQuota', target: { ...application, plan }, status: 204 },
      { action: 'createApplicationQuota', target: { ...application, plan }, status: 201 },
      { action: 'deleteQuota', target: { quota: plan }, status: 409 },
    ]);
  });

  it('names in docs/logging.md every action of the Quota API that may change something', async () => {
    const gateway = await start();
    const document = (await call(gateway, 'GET', '/openapi.json')).body as {
      paths: Record<string, Record<string, { operationId: string }>>;
    };
    const changes = Object.values(document.paths).flatMap((verbs) =>
      Object.entries(verbs)
        .filter(([verb]) => !['get', 'head', 'options'].includes(verb))
        .map(([, operation]) => operation.operationId),
    );
    expect(changes).toContain('clearFailedLogins');
    const page = readFileSync('docs/logging.md', 'utf8');
    for (const action of [...changes, 'lockout']) expect(page).toContain(`\`${action}\``);
  });
});

/** Opens a session with the login form; its cookie (`name=value`) and CSRF-Token. */
async function logIn(gateway: TestGateway, username: string, password: string) {
  const answer = await postLoginForm(gateway, username, password);
  const cookie = answer.headers.get('set-cookie')?.split(';')[0];
  return { status: answer.status, cookie, csrf: answer.headers.get('csrf-token') };
}

/** Calls `/api/portal/v1.3<path>` with a session's cookie and CSRF-Token. */
const withSession = (
  gateway: TestGateway,
  method: string,
  path: string,
  session: { cookie?: string; csrf: string | null },
) =>
  fetch(`${gateway.adminUrl}/api/portal/v1.3${path}`, {
    method,
    headers: { cookie: session.cookie ?? '', 'csrf-token': session.csrf ?? '' },
  }).then((answer) => answer.status);

const failedLogin = (actor: string) => ({
  actor,
  role: null,
  client: '127.0.0.1',
  action: 'login',
  target: {},
  outcome: 'failure',
  status: 401,
  level: 40,
});

describe('the audit lines of logins', () => {
  it('writes a line for each failed login, by basic auth or the form, and one when the client must wait; never a password', async () => {
    const gateway = await start();
    const guesses = ['guess-0', 'guess-1', 'guess-2', 'guess-3'];
    for (const guess of guesses)
      expect(
        (await call(gateway, 'GET', '/quotas', undefined, { username: 'ann', password: guess })).status,
      ).toBe(401);
    expect((await logIn(gateway, 'ann', 'guess-4')).status).toBe(401);
    expect((await call(gateway, 'GET', '/quotas', undefined, adminUser)).status).toBe(429);
    expect(
      (await call(gateway, 'GET', '/quotas', undefined, { username: 'nobody', password: 'guess-5' })).status,
    ).toBe(401);
    expect(auditLines(gateway)).toEqual([
      ...[0, 1, 2, 3, 4].map(() => expect.objectContaining(failedLogin('ann'))),
      expect.objectContaining({
        actor: 'ann',
        role: null,
        client: '127.0.0.1',
        action: 'lockout',
        target: { retryAfterSeconds: 900 },
        outcome: 'refused',
        status: 429,
      }),
      expect.objectContaining(failedLogin('nobody')),
    ]);
    const logged = gateway.rawLogs();
    for (const secret of [...guesses, 'guess-4', 'guess-5', adminUser.password])
      expect(logged).not.toContain(secret);
  });

  it('writes a line when a client must wait whatever the usernames', async () => {
    const gateway = await start();
    const names = Array.from({ length: 30 }, (_, i) => `user-${i}`);
    await Promise.all(
      names.map((username) => call(gateway, 'GET', '/quotas', undefined, { username, password: 'pw' })),
    );
    expect(auditLines(gateway).filter((line) => line.action === 'login')).toHaveLength(30);
    expect(auditLines(gateway).filter((line) => line.action === 'lockout')).toEqual([
      expect.objectContaining({
        actor: null,
        client: '127.0.0.1',
        target: { retryAfterSeconds: 900 },
        status: 429,
      }),
    ]);
  });

  it('writes a line for a session opened and closed, and never its cookie, its token or the password', async () => {
    const gateway = await start();
    const session = await logIn(gateway, adminUser.username, adminUser.password);
    expect(session.status).toBe(303);
    expect(await withSession(gateway, 'DELETE', '/login', session)).toBe(204);
    expect(auditLines(gateway)).toEqual([
      expect.objectContaining({ ...byAdmin, action: 'login', target: {}, outcome: 'success', status: 303 }),
      expect.objectContaining({ ...byAdmin, action: 'logout', target: {}, outcome: 'success', status: 204 }),
    ]);
    const logged = gateway.rawLogs();
    for (const secret of [session.cookie!.split('=')[1]!, session.csrf!, adminUser.password])
      expect(logged).not.toContain(secret);
  });

  it('lets an administrator end a lockout with DELETE /failed-logins (from a session opened before it), and writes who did', async () => {
    const gateway = await start();
    const session = await logIn(gateway, adminUser.username, adminUser.password);
    for (const guess of ['a', 'b', 'c', 'd', 'e'])
      await call(gateway, 'GET', '/quotas', undefined, { username: 'ann', password: `wrong-${guess}` });
    expect((await call(gateway, 'GET', '/quotas')).status).toBe(429);
    expect((await call(gateway, 'DELETE', '/failed-logins', undefined, memberUser)).status).toBe(403);
    expect(await withSession(gateway, 'DELETE', '/failed-logins', session)).toBe(204);
    expect((await call(gateway, 'GET', '/quotas')).status).toBe(200);
    expect(auditLines(gateway).filter((line) => line.action === 'clearFailedLogins')).toEqual([
      expect.objectContaining({ actor: 'max', role: 'member', outcome: 'refused', status: 403 }),
      expect.objectContaining({ ...byAdmin, target: { cleared: 5 }, outcome: 'success', status: 204 }),
    ]);
  });
});
