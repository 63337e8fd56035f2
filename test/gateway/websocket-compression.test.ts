import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  accessLines,
  basicAuth,
  devKey,
  mb,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { closed, mustOpen, startWebSocketUpstream, wsUrl } from '../helpers/websockets.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

const defer = cleanupAfterEach();
/** An upstream that accepts permessage-deflate (RFC 7692) whenever it is offered. */
const upstream = useSuiteUpstream(() => startWebSocketUpstream({ perMessageDeflate: true }));

const withKey = { authorization: basicAuth(devKey) };
/** 4 MB of zeros: a few kilobytes once deflated. */
const zeros = Buffer.alloc(4_000_000);

async function gatewayWithSystemQuota(restrictions: unknown[]): Promise<TestGateway> {
  const gateway = await startTestGateway(petsConfig(upstream().url));
  defer(() => gateway.close());
  await setQuota(gateway, { type: 'API', name: 'System', restrictions }, systemQuotaId);
  return gateway;
}

/**
 * Opens a WebSocket with the `ws` client, which offers permessage-deflate, sends `zeros` and waits for
 * their echo, then closes; resolves with the extensions agreed on, the upgrade the upstream saw and the
 * WebSocket's access line.
 */
async function zerosThereAndBack(gateway: TestGateway) {
  const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
  const echoed = new Promise<number>((resolve) => ws.once('message', (data: Buffer) => resolve(data.length)));
  ws.send(zeros);
  expect(await echoed).toBe(zeros.length);
  const extensions = ws.extensions;
  ws.close();
  await closed(ws);
  await expect.poll(() => accessLines(gateway).some((line) => line.status === 101)).toBe(true);
  const line = accessLines(gateway).find((entry) => entry.status === 101)!;
  return { extensions, offered: upstream().upgrades.at(-1)!.headers, line };
}

describe('permessage-deflate and the byte restrictions that count a WebSocket', () => {
  it('offers the upstream no extension while a throttlemb restriction counts the WebSocket, and counts every payload byte', async () => {
    const gateway = await gatewayWithSystemQuota([mb(100, 1, 'minute')]);
    const { extensions, offered, line } = await zerosThereAndBack(gateway);
    expect(offered['sec-websocket-extensions']).toBeUndefined();
    expect(extensions).toBe('');
    // The 4 MB each way, with their frame heads and the close frames: no more than 64 bytes besides.
    expect(line.bytesIn).toBeGreaterThanOrEqual(zeros.length);
    expect(line.bytesIn).toBeLessThan(zeros.length + 64);
    expect(line.bytesOut).toBeGreaterThanOrEqual(zeros.length);
    expect(line.bytesOut).toBeLessThan(zeros.length + 64);
  });

  it('offers it no extension under a shadow throttlemb restriction either', async () => {
    const gateway = await gatewayWithSystemQuota([{ ...mb(100, 1, 'minute'), mode: 'shadow' }]);
    const { extensions, offered, line } = await zerosThereAndBack(gateway);
    expect(offered['sec-websocket-extensions']).toBeUndefined();
    expect(extensions).toBe('');
    expect(line.bytesIn).toBeGreaterThanOrEqual(zeros.length);
  });

  it('relays the offer as it is when no byte restriction counts the WebSocket', async () => {
    const gateway = await gatewayWithSystemQuota([throttle(100, 1, 'minute')]);
    const { extensions, offered, line } = await zerosThereAndBack(gateway);
    expect(offered['sec-websocket-extensions']).toMatch(/^permessage-deflate/);
    expect(extensions).toContain('permessage-deflate');
    expect(line.bytesIn).toBeLessThan(zeros.length / 100);
  });
});
