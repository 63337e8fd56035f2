import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, inject } from 'vitest';
import {
  adminUser,
  getPetMethodId,
  petsApiId,
  petsConfig,
  startTestGateway,
  userAuth,
  type TestGateway,
} from './test-gateway.js';

/** The Quota API suites' gateway: the pets API, a second API and one application of conf/. */
export const mobileAppId = '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
export const otherApiMethodId = '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';

/** A throttle restriction on getPet, 10 per second unless `overrides` says otherwise. */
export const getPetThrottle = (overrides: Record<string, unknown> = {}) => ({
  api: petsApiId,
  method: getPetMethodId,
  type: 'throttle',
  config: { messages: 10, per: '1', period: 'seconds' },
  ...overrides,
});

/** A QuotaDTO of type API with one getPet restriction, as a client would POST it. */
export const quotaDto = (overrides: Record<string, unknown> = {}) => ({
  type: 'API',
  name: 'Pets',
  description: 'pets limit',
  restrictions: [getPetThrottle()],
  ...overrides,
});

export interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

export interface CallOptions {
  /** Who calls: the admin unless given; `null` sends no credentials. */
  user?: { username: string; password: string } | null;
  body?: unknown;
  /** A body sent as is (JSON unless `headers` names another type). */
  raw?: string;
  headers?: Record<string, string>;
}

export interface QuotaApi {
  /** The admin listener's origin, once the gateway has started. */
  adminUrl(): string;
  /** Calls `/api/portal/v1.3<path>` and parses the JSON answer. */
  call(method: string, path: string, options?: CallOptions): Promise<Answer>;
  errorsOf(answer: Answer): Array<{ code: number; message: string }>;
}

/**
 * Starts the Quota API suites' gateway on the store named before the suite that calls it, and stops it
 * after: each Redis suite has a prefix of its own, so suites in parallel never see each other's quotas.
 */
export function useQuotaApiGateway(storeType: 'memory' | 'redis'): QuotaApi {
  let gateway: TestGateway;
  beforeAll(async () => {
    const store =
      storeType === 'redis'
        ? { store: { type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` } }
        : {};
    gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9', {
        ...store,
        applications: [
          { id: mobileAppId, name: 'Mobile', apikey_development: 'mobile-dev-key-0123456789abcdef' },
        ],
        apis: [
          ...(petsConfig('http://127.0.0.1:9').apis as unknown[]),
          {
            id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
            name: 'Store',
            basePath: '/store',
            upstream: 'http://127.0.0.1:9',
            methods: [{ id: otherApiMethodId, name: 'getInventory', verb: 'GET', path: '/inventory' }],
          },
        ],
      }),
    );
  });
  afterAll(() => gateway.close());

  return {
    adminUrl: () => gateway.adminUrl,
    async call(method, path, options = {}) {
      const user = options.user === undefined ? adminUser : options.user;
      const headers: Record<string, string> = {
        ...(user ? { authorization: userAuth(user) } : {}),
        ...options.headers,
      };
      let body: string | undefined = options.raw;
      if (options.body !== undefined) body = JSON.stringify(options.body);
      if (body !== undefined) headers['content-type'] ??= 'application/json';
      const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3${path}`, { method, headers, body });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
    },
    errorsOf: (answer) => (answer.body as { errors: Array<{ code: number; message: string }> }).errors,
  };
}
