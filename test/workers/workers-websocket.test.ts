import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminUser, petsConfig, userAuth } from '../helpers/test-gateway.js';
import { useWorkerGateways } from '../helpers/worker-gateways.js';
import {
  closed,
  echo,
  mustOpen,
  startWebSocketUpstream,
  wsUrl,
  type WebSocketUpstream,
} from '../helpers/websockets.js';

/**
 * With `workers: 2`, each worker takes WebSocket upgrades on the connections it is handed, and a key
 * revoked on the primary's admin port closes the WebSockets it opened on every worker. Through the real
 * CLI; every process is stopped by pid.
 */
const { startGateway } = useWorkerGateways();
let upstream: WebSocketUpstream;
beforeAll(async () => {
  upstream = await startWebSocketUpstream();
});
afterAll(() => upstream.close());

async function admin(adminUrl: string, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${adminUrl}/api/portal/v1.3${path}`, {
    method,
    headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

describe('WebSockets with workers: 2', () => {
  it('opens WebSockets on both workers, and closes them all once their key is revoked', async () => {
    const gateway = await startGateway({ workers: 2, apis: petsConfig(upstream.url).apis });
    const app = (await (await admin(gateway.admin, 'POST', '/applications', { name: 'Chat' })).json()) as {
      id: string;
    };
    const made = (await (
      await admin(gateway.admin, 'POST', `/applications/${app.id}/apikeys`, {})
    ).json()) as {
      id: string;
      key: string;
    };
    const authorization = `Basic ${Buffer.from(`${made.key}:`).toString('base64')}`;
    // A key made on the primary reaches each worker in its own time.
    await expect
      .poll(async () => {
        const opened = await mustOpen(wsUrl(gateway.url, '/pets/1'), { authorization }).catch(() => null);
        opened?.ws.close();
        return opened !== null;
      })
      .toBe(true);
    const sockets = await Promise.all(
      Array.from({ length: 6 }, () => mustOpen(wsUrl(gateway.url, '/pets/1'), { authorization })),
    );
    for (const { ws } of sockets) expect(await echo(ws, 'hello')).toBe('hello');
    const ends = sockets.map(({ ws }) => closed(ws));
    expect((await admin(gateway.admin, 'DELETE', `/applications/${app.id}/apikeys/${made.id}`)).status).toBe(
      204,
    );
    for (const end of ends) expect(await end).toEqual({ code: 1008, reason: 'credentials revoked' });
    const workersOf = () =>
      new Set(
        gateway
          .logs()
          .filter((line) => line.component === 'access' && line.status === 101)
          .map((line) => line.worker),
      ).size;
    await expect.poll(workersOf).toBe(2);
  });
});
