import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { Gateway } from '../../src/gateway/pipeline.js';
import type { StoredQuota } from '../../src/quota/model.js';
import { systemQuotaId } from '../../src/quota/quota-terms.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { answeringAuthenticator, stepContext, stepRuleSet } from '../helpers/step-parts.js';
import { startUpstream } from '../helpers/upstream.js';

const oneAMinute: StoredQuota = {
  quota: {
    id: systemQuotaId,
    type: 'API',
    name: 'system',
    description: '',
    system: true,
    restrictions: [
      { api: '*', method: '*', type: 'throttle', config: { messages: '1', per: '1', period: 'minute' } },
    ],
  },
  etag: '"1"',
};

describe('the pipeline, built from its parts without a host', () => {
  const defer = cleanupAfterEach();
  let server: Server | null = null;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  async function start(authenticatorThrows = false) {
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const parts = stepContext([oneAMinute]);
    const { authenticator } = answeringAuthenticator({ ok: true, principal: null });
    if (authenticatorThrows)
      authenticator.authenticate = () => {
        throw new Error('the plugin broke');
      };
    const ruleSet = stepRuleSet(authenticator, upstream.url);
    const gateway = new Gateway({
      dataPlane: ruleSet,
      proxy: parts.context.proxy,
      quotas: parts.context.quotas,
      limiter: parts.context.limiter,
      logger: parts.context.logger,
      accessLog: null,
      metrics: parts.metrics,
      clock: parts.clock,
    });
    defer(() => parts.context.proxy.close());
    server = createServer(gateway.handle);
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return { gateway, upstream, url, parts, ruleSet };
  }

  it('forwards an admitted request to the upstream target, refuses the next past its quota, and is idle after', async () => {
    const { gateway, upstream, url } = await start();
    const first = await request(`${url}/PETS/7?a=b`);
    expect(first.statusCode).toBe(200);
    await first.body.text();
    expect(upstream.requests.map((seen) => seen.url)).toEqual(['/v2/7?a=b']);
    const second = await request(`${url}/pets/7`);
    expect(second.statusCode).toBe(429);
    await second.body.text();
    expect(upstream.requests).toHaveLength(1);
    await expect(gateway.waitForIdle(1_000)).resolves.toBe(true);
  });

  it('answers 500 when a step throws, and logs the failure with the request id', async () => {
    const { url, parts } = await start(true);
    const answer = await request(`${url}/pets/7`, { headers: { 'x-request-id': 'req-1' } });
    expect(answer.statusCode).toBe(500);
    await answer.body.text();
    expect(parts.lines).toContainEqual(
      expect.objectContaining({ msg: 'request pipeline failed', requestId: 'req-1' }),
    );
  });

  it('puts a swapped rule set in force for new requests, and closes the old one once it is left', async () => {
    const { gateway, ruleSet, upstream } = await start();
    let closed = 0;
    ruleSet.authenticator.close = () => {
      closed += 1;
      return Promise.resolve();
    };
    const next = stepRuleSet(
      answeringAuthenticator({ ok: true, principal: null }).authenticator,
      upstream.url,
    );
    gateway.swap(next);
    expect(gateway.dataPlane).toBe(next);
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(1);
  });
});
