import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { describe, expect, inject, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

/**
 * The close order of a gateway (src/runtime/closers.ts): an answer still read for its units after its
 * client left is charged to the counters when the gateway stops while it is read, past the grace period
 * too. The charge goes through the limiter, so the limiter and its store close after the drain, never
 * before it.
 */
const defer = cleanupAfterEach();

const tokens = {
  api: '*',
  method: '*',
  type: 'throttleunits',
  config: { units: 100, per: 1, period: 'hour', header: 'X-Tokens', default: 3 },
};

/** An upstream that sends a head and a first chunk, then never ends its answer: its reading is cut. */
async function endlessUpstream() {
  let upstreamDone!: (how: string) => void;
  const done = new Promise<string>((resolve) => (upstreamDone = resolve));
  const upstream = await startUpstream((_req: IncomingMessage, res: ServerResponse) => {
    res.on('close', () => upstreamDone(res.writableFinished ? 'finished' : 'cut off'));
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'X-Tokens' });
    res.write('first chunk, and never an end');
  });
  defer(() => upstream.close());
  return { url: upstream.url, done };
}

/** A GET whose client hangs up as soon as the first body bytes arrive. */
function hangUpAfterFirstChunk(gateway: TestGateway): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${gateway.url}/pets/1`,
      { headers: { authorization: basicAuth(devKey) }, agent: false },
      (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (!req.destroyed) reject(error);
    });
  });
}

describe('a gateway stopped while an answer is read after its client left', () => {
  it('charges the answer its default through counters still open, after the grace period', async () => {
    const upstream = await endlessUpstream();
    const store = {
      type: 'redis',
      url: inject('redisUrl'),
      prefix: `test:close-order:${Date.now()}:${Math.random()}:`,
    };
    const staying = await startTestGateway(petsConfig(`${upstream.url}/pets`, { store }));
    defer(() => staying.close());
    await setQuota(staying, { type: 'API', name: 'System', restrictions: [tokens] }, systemQuotaId);
    // Started once the quota is in the store: it loads it as it starts.
    const leaving = await startTestGateway(
      petsConfig(`${upstream.url}/pets`, { store, shutdownTimeout: 100 }),
    );
    await hangUpAfterFirstChunk(leaving);
    await expect.poll(() => accessLines(leaving).at(-1)?.outcome).toBe('client_aborted');
    await leaving.close();
    expect(await upstream.done).toBe('cut off');
    expect(leaving.logs.filter((line) => /charging measured units failed/.test(String(line.msg)))).toEqual(
      [],
    );
    const used = async () => (await quotaUsage(staying.adminUrl, systemQuotaId)).restrictions[0]!.used;
    await expect.poll(used).toBe(3);
  });
});
