import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { leaveAfterFirstBytes, startSlowAnswerUpstream } from '../helpers/leaving-clients.js';
import { llmApis, openAiTokens, tokens } from '../helpers/llm-gateway.js';
import { adminUser, systemQuotaId, userAuth } from '../helpers/test-gateway.js';
import { metricValue, useWorkerGateways } from '../helpers/worker-gateways.js';

/**
 * `upstreamDrainLimit` with `workers: 2` through the real CLI: each worker bounds the answers it reads
 * after their clients left, and `/metrics` adds up the reads each cut (issue 42, point 9).
 */
const defer = cleanupAfterEach();
const { startGateway } = useWorkerGateways();

describe('workers: 2 with upstreamDrainLimit: 1', () => {
  it('cut, in each worker, all but the newest answer read after its client left, and /metrics counts them all', async () => {
    const upstream = await startSlowAnswerUpstream(
      'application/json',
      '{"choices":[{"message":{"content":"hal',
      'lo"}}],"usage":{"total_tokens":31}}',
    );
    defer(() => upstream.close());
    const gateway = await startGateway({
      workers: 2,
      apis: llmApis(upstream.url),
      upstreamDrainLimit: 1,
    });
    const quota = await fetch(`${gateway.admin}/api/portal/v1.3/quotas/${systemQuotaId}`, {
      method: 'PUT',
      headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
      body: JSON.stringify({
        type: 'API',
        name: 'System',
        restrictions: [tokens({ body: openAiTokens, default: 7 })],
      }),
    });
    expect(quota.status).toBe(200);
    const leftLines = () =>
      gateway.logs().filter((line) => line.component === 'access' && line.outcome === 'client_aborted');
    // Each on a connection of its own: node:cluster hands connections to the workers in turn.
    for (let call = 0; call < 4; call += 1) {
      await leaveAfterFirstBytes(gateway.url, '/v1/chat/completions', { 'x-call': String(call) });
      await expect.poll(() => leftLines().length, { timeout: 10_000 }).toBe(call + 1);
    }
    const leftPerWorker = new Map<number, number>();
    for (const line of leftLines()) {
      const worker = line.worker as number;
      leftPerWorker.set(worker, (leftPerWorker.get(worker) ?? 0) + 1);
    }
    // Each worker reads its newest alone: 4 calls over 2 workers cut at least 2.
    const cut = [...leftPerWorker.values()].reduce((sum, left) => sum + left - 1, 0);
    expect(cut).toBeGreaterThanOrEqual(2);
    await expect.poll(() => upstream.cut.length, { timeout: 10_000 }).toBe(cut);
    expect(upstream.open.size).toBe(leftPerWorker.size);
    const drainsCut = /^quotagate_upstream_drains_cut_total (\d+)$/m;
    await expect.poll(() => metricValue(gateway, drainsCut), { timeout: 10_000 }).toBe(cut);
    upstream.letGo();
    await expect.poll(() => upstream.open.size, { timeout: 10_000 }).toBe(0);
  }, 60_000);
});
