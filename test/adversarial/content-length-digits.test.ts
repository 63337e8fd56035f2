import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  type GatewayOverUpstream,
  setQuota,
  startGatewayOverUpstream,
  type TestGateway,
} from '../helpers/test-gateway.js';
import type { TestUpstream } from '../helpers/upstream.js';

/**
 * README, Counting: "A declared Content-Length is charged when the request is admitted (refused up front
 * with 429 when it does not fit in what is left, and with 413 … when it is larger than the restriction's
 * whole window)". Node reads `Content-Length: 0000000000100000` as 100,000 bytes and frames the body by
 * it; the gateway must judge the same number, however many leading zeros spell it.
 */

const authorization = basicAuth(devKey);
const systemQuotaId = '00000000-0000-0000-0000-000000000000';
const body = 'x'.repeat(100_000);

let upstream: TestUpstream;
let gateway: TestGateway;
let host: string;
let setup: GatewayOverUpstream;

beforeAll(async () => {
  setup = await startGatewayOverUpstream();
  ({ upstream, gateway, host } = setup);
  // 0.001 MB = 1,048 bytes a day: a body of 100,000 bytes can never fit.
  await setQuota(
    gateway,
    {
      type: 'API',
      name: 'System',
      restrictions: [
        { api: '*', method: '*', type: 'throttlemb', config: { mb: '0.001', per: '1', period: 'day' } },
      ],
    },
    systemQuotaId,
  );
});

afterAll(() => setup.close());

describe('a declared body larger than a throttlemb window', () => {
  it.each([
    ['as written', String(body.length)],
    ['with leading zeros (16 digits)', String(body.length).padStart(16, '0')],
    ['with leading zeros (24 digits)', String(body.length).padStart(24, '0')],
  ])('answers 413 to a Content-Length %s and sends nothing upstream', async (_case, contentLength) => {
    const before = upstream.requests.length;
    const answer = await rawExchange(
      gateway.url,
      `POST /pets HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${authorization}\r\nContent-Length: ${contentLength}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(upstream.requests.length).toBe(before);
  });
});
