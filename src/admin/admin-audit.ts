import type { FastifyInstance, FastifyRequest } from 'fastify';
import { plainAddress } from '../upstream/fields/trust-proxy.js';
import type { Logger } from '../observe/log.js';
import type { AdminRole } from './admin-users.js';
import type { FailedLoginEvent } from './failed-logins.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** What a change acted on, as its handler learned it (a created id, a plan): added to the audit line. */
    auditTarget?: AuditTarget;
  }
}

/** The ids (and a few plain facts: an environment, a flag, a count) a change acted on. Never a secret. */
export type AuditTarget = Record<string, string | number | boolean>;

/**
 * One line of the admin audit trail, in one shape for every event: who (`actor`, `role`), from where
 * (`client`), what (`action`: the Quota API's operationId, or `login`, `lockout`), on what (`target`),
 * and how it ended (`outcome`, `status`).
 */
export interface AuditLine {
  /** The admin user, or the username a failed login tried; null for a lockout of a whole client. */
  actor: string | null;
  /** The actor's role; null when no user was proven (a failed login, a lockout). */
  role: AdminRole | null;
  /** The peer's address; for a lockout, what is counted (an address, or an IPv6 /64). */
  client: string;
  action: string;
  target: AuditTarget;
  /** `success` (2xx, 3xx), `refused` (4xx, a lockout), `error` (5xx), `failure` (a wrong password). */
  outcome: 'success' | 'refused' | 'error' | 'failure';
  status: number;
}

/** Usernames are the client's text: a line keeps no more of one than an admin username needs. */
const maxUsernameLength = 100;

/** What a path parameter names, by the collection it stands in: `/quotas/:id` is a quota. */
const collections: Readonly<Record<string, string>> = {
  quotas: 'quota',
  applications: 'application',
  apikeys: 'key',
};

/** Methods that change nothing: they leave no audit line. */
const readOnly = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The audit trail of the admin listener: one `"audit": true` line per change, failed login and lockout. */
export class AdminAudit {
  private readonly log: Logger;

  constructor(logger: Logger) {
    this.log = logger.child({ audit: true });
  }

  private write(line: AuditLine): void {
    const level = line.outcome === 'success' ? 'info' : 'warn';
    this.log[level](line, `admin ${line.action}: ${line.outcome}`);
  }

  /** The line of a failed login or of a lockout (FailedLogins reports them). */
  login(event: FailedLoginEvent): void {
    const username = (name: string) => name.slice(0, maxUsernameLength);
    if (event.kind === 'failure') {
      this.write({
        actor: username(event.username),
        role: null,
        client: event.client,
        action: 'login',
        target: {},
        outcome: 'failure',
        status: 401,
      });
      return;
    }
    this.write({
      actor: event.username === undefined ? null : username(event.username),
      role: null,
      client: event.client,
      action: 'lockout',
      target: { retryAfterSeconds: event.seconds },
      outcome: 'refused',
      status: 429,
    });
  }

  /**
   * Writes a line, as the answer leaves, for every request of a proven admin user that may change
   * something (every method but GET, HEAD and OPTIONS), whatever its answer: a refused change is a trace
   * too. It is written before the answer, so no client sees a change its line does not hold yet.
   */
  follow(app: FastifyInstance): void {
    app.addHook('onSend', async (request, reply, payload) => {
      const user = request.adminUser;
      const action = (request.routeOptions.schema as { operationId?: string } | undefined)?.operationId;
      if (!user || action === undefined || readOnly.has(request.method)) return payload;
      const status = reply.statusCode;
      this.write({
        actor: user.username,
        role: user.role,
        client: plainAddress(request.raw.socket.remoteAddress ?? 'unknown'),
        action,
        target: { ...paramTargets(request), ...request.auditTarget },
        outcome: status < 400 ? 'success' : status < 500 ? 'refused' : 'error',
        status,
      });
      return payload;
    });
  }
}

/** Adds to what the audit line of this request names (a created id, the plan an application went on). */
export function noteTarget(request: FastifyRequest, target: AuditTarget): void {
  request.auditTarget = { ...request.auditTarget, ...target };
}

/** The ids of the route's path, named by their collection: `/applications/:id/apikeys/:keyId`. */
function paramTargets(request: FastifyRequest): AuditTarget {
  const segments = (request.routeOptions.url ?? '').split('/');
  const params = (request.params ?? {}) as Record<string, string | undefined>;
  const target: AuditTarget = {};
  segments.forEach((segment, i) => {
    const name = collections[segments[i - 1] ?? ''];
    const value = segment.startsWith(':') ? params[segment.slice(1)] : undefined;
    if (name !== undefined && value !== undefined) target[name] = value;
  });
  return target;
}
