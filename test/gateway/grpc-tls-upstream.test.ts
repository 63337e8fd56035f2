import { readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  greeterApi,
  greeterClient,
  metadataOf,
  startGreeterUpstream,
  type GreeterUpstream,
} from '../helpers/grpc-greeter.js';
import { http2Fetch } from '../helpers/http2-client.js';
import { spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import { basicAuth, devKey, petsConfig, writeSeedConfigDir } from '../helpers/test-gateway.js';
import { createTestCertificate, type TestCertificate } from '../helpers/tls-cert.js';

/**
 * A gRPC API whose upstream is `https://`: TLS whose ALPN must choose h2 (issue 32, point 4). The gateway
 * runs as its own process so that it trusts the test certificate as an operator would make it trust a
 * private CA (NODE_EXTRA_CA_CERTS, read when Node starts).
 */
let certificate: TestCertificate;
let greeter: GreeterUpstream;
let http1: https.Server;
let cli: CliProcess;
let configDir: string;
let gatewayUrl: string;

const otherApiId = '8b9c0d1e-2f3a-4b4c-8d5e-6f7a8b9c0d1e';

beforeAll(async () => {
  certificate = await createTestCertificate();
  const key = readFileSync(certificate.keyFile);
  greeter = await startGreeterUpstream({ key, cert: Buffer.from(certificate.cert) });
  // Node's HTTPS server chooses http/1.1 by ALPN.
  http1 = https.createServer({ key, cert: certificate.cert }, (_req, res) => res.end('an HTTP/1.1 answer'));
  await new Promise<void>((resolve) => http1.listen(0, '127.0.0.1', resolve));
  const http1Port = (http1.address() as AddressInfo).port;
  configDir = writeSeedConfigDir(
    petsConfig('http://127.0.0.1:9', {
      apis: [
        greeterApi(`https://localhost:${greeter.port}`),
        {
          id: otherApiId,
          name: 'Other',
          protocol: 'grpc',
          basePath: '/other.Greeter',
          upstream: `https://localhost:${http1Port}`,
          methods: [
            { id: '9c0d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f', name: 'SayHello', verb: 'POST', path: '/SayHello' },
          ],
        },
      ],
    }),
  );
  cli = spawnCli(['start', '--config-dir', configDir], {
    env: { NODE_EXTRA_CA_CERTS: certificate.certFile },
  });
  gatewayUrl = `http://127.0.0.1:${(await startedPorts(cli)).http}`;
});

afterAll(async () => {
  if (cli && cli.child.exitCode === null) {
    cli.child.kill('SIGTERM');
    await cli.exited;
  }
  await greeter?.close();
  await new Promise<void>((resolve) => (http1 ? http1.close(() => resolve()) : resolve()));
  rmSync(configDir, { recursive: true, force: true });
  rmSync(certificate.dir, { recursive: true, force: true });
});

describe('a gRPC upstream over TLS', () => {
  it('passes calls to an upstream whose TLS chose h2 by ALPN', async () => {
    const client = greeterClient(new URL(gatewayUrl).host);
    try {
      const unary = await client.sayHello('ann', metadataOf({ authorization: basicAuth(devKey) }));
      expect(unary.status.code).toBe(status.OK);
      expect(unary.replies).toEqual([{ message: 'Hello ann' }]);
      const chat = await client.chat(['ann', 'bob'], metadataOf({ authorization: basicAuth(devKey) }));
      expect(chat.replies.map((reply) => reply.message)).toEqual(['Hello ann', 'Hello bob']);
      expect(chat.status.metadata.get('x-served-by')).toEqual(['greeter']);
    } finally {
      client.close();
    }
  });

  it('answers UNAVAILABLE when the TLS upstream speaks HTTP/1.1, and logs why, never falling back to it', async () => {
    const answer = await http2Fetch(gatewayUrl, {
      method: 'POST',
      path: '/other.Greeter/SayHello',
      headers: { 'content-type': 'application/grpc', te: 'trailers', authorization: basicAuth(devKey) },
      body: String.fromCharCode(0, 0, 0, 0, 0),
    });
    expect(answer.headers['grpc-status']).toBe('14');
    await cli.waitFor('the upstream of a gRPC API does not speak HTTP/2');
    const line = cli
      .stdout()
      .split('\n')
      .find((text) => text.includes('does not speak HTTP/2'))!;
    expect(JSON.parse(line)).toMatchObject({
      err: { message: 'TLS chose http/1.1 by ALPN, not h2' },
      outcome: 'invalid',
    });
  });
});
