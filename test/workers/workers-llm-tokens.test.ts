import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  anthropicPaths,
  chat,
  llmApis,
  messages,
  openAiTokens,
  post,
  tokens,
} from '../helpers/llm-gateway.js';
import { anthropicTokens, openAiJsonTokens, startLlmUpstream } from '../helpers/llm-upstream.js';
import { adminUser, systemQuotaId, userAuth } from '../helpers/test-gateway.js';
import { systemUsage, useWorkerGateways } from '../helpers/worker-gateways.js';

/** `workers: 2` on the memory store: the units an LLM API's answers say are charged through the primary. */
const defer = cleanupAfterEach();
const { startGateway, answeredByWorker } = useWorkerGateways();

describe('workers: 2 in front of an LLM API limited by tokens', () => {
  it('charge what the bodies say, a client that hung up after the first event included, to one count', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const upstream = await startLlmUpstream({ beforeEvent: (index) => (index === 1 ? gate : undefined) });
    defer(() => upstream.close());
    const gateway = await startGateway({ workers: 2, apis: llmApis(upstream.url) });
    const res = await fetch(`${gateway.admin}/api/portal/v1.3/quotas/${systemQuotaId}`, {
      method: 'PUT',
      headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
      body: JSON.stringify({
        type: 'API',
        name: 'System',
        restrictions: [tokens({ body: [openAiTokens, ...anthropicPaths] })],
      }),
    });
    expect(res.status).toBe(200);
    // Each on a connection of its own: node:cluster hands connections to the workers in turn.
    const left = await post(gateway, '/v1/messages', messages, { onEvent: (_index, req) => req.destroy() });
    expect(left.status).toBe(200);
    release();
    for (let call = 0; call < 3; call += 1) {
      expect((await post(gateway, '/v1/chat/completions', chat)).status).toBe(200);
    }
    await expect
      .poll(async () => (await systemUsage(gateway)).used)
      .toBe(anthropicTokens + 3 * openAiJsonTokens);
    await expect.poll(() => answeredByWorker(gateway).size).toBe(2);
  });
});
