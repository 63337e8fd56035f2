import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Authenticator } from '../../src/auth/authenticator.js';

export interface AuthProbe {
  url: string;
  close(): Promise<void>;
}

/**
 * A real HTTP server whose only job is to run `authenticator` on each request and answer its result as
 * JSON, so tests see exactly what the gateway would act on (principal, groups, rejection).
 */
export async function startAuthProbe(authenticator: Authenticator): Promise<AuthProbe> {
  const server: Server = http.createServer((req, res) => {
    void Promise.resolve(authenticator.authenticate(req, res, req.url ?? '/')).then((result) => {
      if (res.headersSent) return;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(result));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
