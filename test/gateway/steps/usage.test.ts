import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { route } from '../../../src/gateway/steps/route.js';
import { usage } from '../../../src/gateway/steps/usage.js';
import { usageReadsPerWindow } from '../../../src/gateway/usage-endpoint.js';
import { answeringAuthenticator, recordServer, stepContext, stepRuleSet } from '../../helpers/step-parts.js';

describe('the usage step', () => {
  let close: () => Promise<void> = () => Promise.resolve();
  afterEach(() => close());

  async function serve() {
    const parts = stepContext();
    const { authenticator } = answeringAuthenticator({ ok: true, principal: null });
    const verdicts: boolean[] = [];
    const server = await recordServer(stepRuleSet(authenticator), async (record) => {
      if (route(parts.context, record)) verdicts.push(await usage(parts.context, record));
    });
    close = server.close;
    return { ...server, ...parts, verdicts };
  }

  it('lets every request but a read of the usage path go on, at once', async () => {
    const server = await serve();
    expect((await request(`${server.url}/pets/1`)).statusCode).toBe(204);
    expect(server.verdicts).toEqual([true]);
  });

  it("answers a read with the caller's restrictions and ends the request there", async () => {
    const server = await serve();
    const { statusCode, body, headers } = await request(`${server.url}/_quotagate/usage`);
    expect(statusCode).toBe(200);
    expect(headers['cache-control']).toBe('no-store');
    expect(await body.json()).toEqual({ application: null, restrictions: [] });
    expect(server.verdicts).toEqual([false]);
    expect(server.records[0]!.status).toBe(200);
  });

  it("holds a caller to its read budget on the pipeline's clock, and lets it read again once the window passed", async () => {
    const server = await serve();
    for (let i = 0; i < usageReadsPerWindow; i += 1)
      expect((await request(`${server.url}/_quotagate/usage`)).statusCode).toBe(200);
    const refused = await request(`${server.url}/_quotagate/usage`);
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBe('10');
    server.clock.time += 10_000;
    expect((await request(`${server.url}/_quotagate/usage`)).statusCode).toBe(200);
  });
});
