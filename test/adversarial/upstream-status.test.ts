import { rmSync } from 'node:fs';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { rawExchange } from '../helpers/raw-http.js';
import { spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  writeSeedConfigDir,
  type TestGateway,
  accessLines,
} from '../helpers/test-gateway.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * An upstream that answers with a status line a gateway must not relay: a status below 100 (Node's
 * `writeHead` throws on it), an unsolicited 101, and an unsolicited 100 Continue. Whatever one upstream answers, the gateway must
 * answer the client (502) and keep serving everyone else; it must never die or leave the client waiting.
 */

/** A raw upstream that answers every request with `answer`, exactly as written. */
async function rawUpstream(answer: string): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    socket.once('data', () => socket.write(answer));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const authorization = basicAuth(devKey);
const getPet = (host: string) =>
  `GET /pets/1 HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${authorization}\r\nConnection: close\r\n\r\n`;

const defer = cleanupAfterEach();

describe('an upstream status line the gateway cannot relay', () => {
  it('answers 502 and stays up when the upstream answers with a status below 100', async () => {
    const upstream = await rawUpstream('HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n');
    defer(() => upstream.close());
    const dir = writeSeedConfigDir(petsConfig(`${upstream.url}/pets`));
    defer(() => rmSync(dir, { recursive: true, force: true }));
    const cli: CliProcess = spawnCli(['start', '--config-dir', dir]);
    defer(() => {
      if (cli.child.exitCode === null) cli.child.kill('SIGKILL');
    });
    const ports = await startedPorts(cli);
    const host = `127.0.0.1:${ports.http}`;

    const answer = await rawExchange(`http://${host}`, getPet(host)).catch((error: Error) => error.message);
    expect(answer).toMatch(/^HTTP\/1\.1 502 /);
    // The same process still answers: a crash after the 502 would fail this request.
    const health = await fetch(`http://127.0.0.1:${ports.admin}/healthz`).catch((error: Error) => error);
    expect(health instanceof Response ? health.status : String(health)).toBe(200);
    expect(cli.child.exitCode, `the gateway process exited:\n${cli.stderr()}`).toBeNull();
  });

  it('answers 502 within proxyTimeout when the upstream switches protocols unasked (101)', async () => {
    const upstream = await rawUpstream(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
    );
    defer(() => upstream.close());
    const gateway: TestGateway = await startTestGateway(
      petsConfig(`${upstream.url}/pets`, { proxyTimeout: 500 }),
    );
    defer(() => gateway.close());
    const host = new URL(gateway.url).host;

    // proxyTimeout is 500 ms: 3 s is six times what the README allows before a 504 (or a 502).
    const answer = await rawExchange(gateway.url, getPet(host), 3_000).catch(
      (error: Error) => `no answer: ${error.message}`,
    );

    expect(answer).toMatch(/^HTTP\/1\.1 502 /);
    expect(accessLines(gateway).at(-1)).toMatchObject({
      status: 502,
      outcome: 'invalid',
    });
  });

  it('answers 502 when the upstream answers 100 Continue to a request that did not ask for it', async () => {
    // The gateway never sends Expect upstream: a 100 is the upstream's mistake, not the client's to see.
    const upstream = await rawUpstream(
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
    );
    defer(() => upstream.close());
    const gateway: TestGateway = await startTestGateway(petsConfig(`${upstream.url}/pets`));
    defer(() => gateway.close());
    const answer = await rawExchange(gateway.url, getPet(new URL(gateway.url).host));
    expect(answer).toMatch(/^HTTP\/1\.1 502 /);
    expect(accessLines(gateway).at(-1)).toMatchObject({
      outcome: 'invalid',
    });
  });
});
