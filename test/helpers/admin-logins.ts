import { hashPassword } from '../../src/kit/password-hash.js';
import { cleanupAfterEach } from './cleanups.js';
import { adminUser, memberUser, petsConfig, startTestGateway, type TestGateway } from './test-gateway.js';

export interface AdminLoginGatewayOptions {
  /**
   * The admin users' passwords as scrypt hashes, as `gateway hash-password` makes them: a check takes a
   * while off the event loop (checks started together are in flight together), and the log's removal of
   * the config's secrets cannot hide a password that a line would otherwise hold.
   */
  hashed?: boolean;
  /** More of the config. */
  config?: Record<string, unknown>;
}

/**
 * The gateways of the admin login suites (the Quota API's users `ann` and `max`, no upstream), on the
 * clock `now`; each is closed after its test.
 */
export function useAdminLoginGateways(
  now: () => number,
): (options?: AdminLoginGatewayOptions) => Promise<TestGateway> {
  const defer = cleanupAfterEach();
  return async ({ hashed = false, config = {} } = {}) => {
    const users = await Promise.all(
      [adminUser, memberUser].map(async (user) =>
        hashed ? { ...user, password: await hashPassword(user.password) } : user,
      ),
    );
    const admin = { host: '127.0.0.1', port: 0, users };
    const gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9', { admin, ...config }),
      {},
      { clock: now },
    );
    defer(() => gateway.close());
    return gateway;
  };
}

/** Posts the login form, as a client of its own does (the 303 is answered, not followed). */
export const postLoginForm = (gateway: TestGateway, username: string, password: string) =>
  fetch(`${gateway.adminUrl}/api/portal/v1.3/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ username, password }).toString(),
  });
