import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { FailedLogins } from './failed-logins.js';
import { z } from 'zod';
import { AdminError, errorResponses } from './admin-errors.js';
import { AdminSessions } from './admin-sessions.js';
import type { AdminUsers } from './admin-users.js';
import { noteTarget } from './admin-audit.js';
import { requireAdmin } from './quota-route-kit.js';

export interface SessionRoutesParts {
  /** The admin users in force (a reload replaces them). */
  users: () => AdminUsers;
  sessions: AdminSessions;
  /** Failed logins so far: a client guessing passwords waits (429). */
  failedLogins: FailedLogins;
}

const loginBody = z.strictObject({
  username: z.string({ error: 'is required' }).min(1, { error: 'must not be empty' }),
  password: z.string({ error: 'is required' }).min(1, { error: 'must not be empty' }),
});

/**
 * Whether a login comes from the console or from a client of its own, not from a page of another site:
 * a form posted across sites would log the browser in as the attacker's user (login CSRF), and
 * SameSite cookies do not stop a top-level POST. Browsers say where a request comes from (Sec-Fetch-Site,
 * Origin); clients such as apim-cli send neither.
 */
function sameSite(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

/** Axway API Manager's roles: `admin` is the API Administrator, `user` anyone else. */
const axwayRole = { admin: 'admin', member: 'user' } as const;

/**
 * Login sessions, as Axway API Manager serves them to its clients (apim-cli logs in this way, then sends
 * the session cookie and the `CSRF-Token` it was given): `POST /login` with a form, `GET /currentuser`,
 * `DELETE /login`. HTTP basic credentials keep working on every route without a session.
 */
export function registerSessionRoutes(app: FastifyInstance, parts: SessionRoutesParts): void {
  app.post(
    '/login',
    {
      config: { public: true, login: true },
      schema: {
        summary:
          'Open a login session (a form or JSON with username and password), as Axway API Manager does',
        operationId: 'login',
        tags: ['sessions'],
        body: loginBody,
        response: {
          303: {
            description:
              'Logged in: the session cookie is set, and the CSRF-Token field holds the token to send with every request that changes something',
            headers: {
              'Set-Cookie': {
                type: 'string',
                description: 'APIMANAGERSESSION=…; HttpOnly; SameSite=Strict (and Secure over HTTPS)',
              },
              'CSRF-Token': { type: 'string', description: 'Send it back in CSRF-Token with every change' },
              Location: { type: 'string', description: 'The current user' },
            },
            type: 'null',
          },
          ...errorResponses,
        },
      },
    },
    async (request, reply) => {
      if (!sameSite(request))
        throw new AdminError(403, ['a login must come from this admin port itself, not from another site']);
      const { username, password } = request.body as z.output<typeof loginBody>;
      const user = await parts.failedLogins.attempt(request.raw.socket.remoteAddress, username, (reserve) =>
        parts.users().verify(username, password, reserve),
      );
      if (!user) throw new AdminError(401, ['the username or the password is wrong']);
      // The request now speaks for the user: its audit line names them.
      request.adminUser = user;
      const session = parts.sessions.open(user.username);
      return reply
        .code(303)
        .header('set-cookie', AdminSessions.cookieFor(session, request.protocol === 'https'))
        .header('csrf-token', session.csrfToken)
        .header('location', request.routeOptions.url!.replace(/\/login$/, '/currentuser'))
        .send();
    },
  );

  app.delete(
    '/login',
    {
      schema: {
        summary: 'Close the login session',
        operationId: 'logout',
        tags: ['sessions'],
        response: { 204: { description: 'Logged out', type: 'null' }, ...errorResponses },
      },
    },
    async (request, reply) => {
      if (request.adminSession) parts.sessions.close(request.adminSession);
      return reply
        .code(204)
        .header('set-cookie', AdminSessions.cookieFor(null, request.protocol === 'https'))
        .send();
    },
  );

  app.delete(
    '/failed-logins',
    {
      schema: {
        summary:
          'Forget every failed login, so that no client waits any longer: the way to end a lockout (API Administrators)',
        operationId: 'clearFailedLogins',
        tags: ['sessions'],
        response: { 204: { description: 'Forgotten', type: 'null' }, ...errorResponses },
      },
    },
    async (request, reply) => {
      requireAdmin(request);
      noteTarget(request, { cleared: parts.failedLogins.clear() });
      return reply.code(204).send();
    },
  );

  app.get(
    '/currentuser',
    {
      schema: {
        summary: 'The user the request speaks for, in the shape of Axway API Manager',
        operationId: 'getCurrentUser',
        tags: ['sessions'],
        response: {
          200: {
            description: 'The user; with a session, the CSRF-Token field repeats its token',
            headers: { 'CSRF-Token': { type: 'string', description: "The session's token, with a session" } },
            type: 'object',
            properties: {
              id: { type: 'string' },
              loginName: { type: 'string' },
              name: { type: 'string' },
              role: { type: 'string', enum: ['admin', 'user'] },
              enabled: { type: 'boolean' },
              state: { type: 'string' },
            },
          },
          ...errorResponses,
        },
      },
    },
    async (request, reply) => {
      const user = request.adminUser!;
      if (request.adminSession) reply.header('csrf-token', request.adminSession.csrfToken);
      return {
        id: user.username,
        loginName: user.username,
        name: user.username,
        role: axwayRole[user.role],
        enabled: true,
        state: 'approved',
      };
    },
  );
}
