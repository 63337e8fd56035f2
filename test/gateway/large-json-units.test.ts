import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore } from '../helpers/enforcement-gateways.js';
import { leaveAfterFirstBytes } from '../helpers/leaving-clients.js';
import { chat, llmApis, openAiTokens, tokens, unreadable, usedOf } from '../helpers/llm-gateway.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

/**
 * A JSON answer over 1 MiB (the client chooses its size with `n` and `logprobs`) is charged the usage
 * it says, wherever it says it (issue 42, point 16): the gateway reads it as it streams past, without
 * holding it, and charges `default` only when no usage can be found in it.
 */
const defer = cleanupAfterEach();

/** About 5 MiB of choices, with braces, brackets and escaped quotes in their text. */
const choices = Array.from({ length: 12_000 }, (_, index) => ({
  index,
  message: { role: 'assistant', content: `{"usage":{"total_tokens":${index}}} \\"]} `.repeat(10) },
  logprobs: { content: [{ token: '"}', logprob: -0.25, bytes: [34, 125] }] },
}));
const usage = { prompt_tokens: 1_000, completion_tokens: 2_345, total_tokens: 3_345 };
const answers: Record<string, Buffer> = {
  'usage-last': Buffer.from(JSON.stringify({ id: 'chatcmpl-1', choices, usage })),
  'usage-first': Buffer.from(JSON.stringify({ id: 'chatcmpl-1', usage, choices })),
  // Cut short by 10 bytes: not JSON, whatever it said before.
  malformed: Buffer.from(JSON.stringify({ id: 'chatcmpl-1', usage, choices }).slice(0, -10)),
};

/**
 * An upstream that answers `x-answer` from `answers`, 64 KiB a write, as a large answer streams; with
 * `after`, the first 64 KiB, then the rest once `after` has resolved.
 */
async function largeAnswerUpstream(after?: Promise<void>) {
  const upstream = await startUpstream((req, res) => {
    const answer = answers[String(req.headers['x-answer'])]!;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(answer.subarray(0, 65_536));
    void (after ?? Promise.resolve()).then(() => {
      for (let at = 65_536; at < answer.length; at += 65_536) res.write(answer.subarray(at, at + 65_536));
      res.end();
    });
  });
  defer(() => upstream.close());
  return upstream;
}

async function gatewayOver(upstreamUrl: string, store: Record<string, unknown>): Promise<TestGateway> {
  const gateway = await startTestGateway(petsConfig(upstreamUrl, { apis: llmApis(upstreamUrl), ...store }));
  defer(() => gateway.close());
  const restrictions = [tokens({ units: 100_000, body: openAiTokens, default: 7 })];
  await setQuota(gateway, { type: 'API', name: 'System', restrictions }, systemQuotaId);
  return gateway;
}

/** A chat completion asking for the answer `variant`, read whole. */
async function call(gateway: TestGateway, variant: string): Promise<{ status: number; body: Buffer }> {
  const answer = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: basicAuth(devKey), 'content-type': 'application/json', 'x-answer': variant },
    body: JSON.stringify(chat),
  });
  return { status: answer.status, body: Buffer.from(await answer.arrayBuffer()) };
}

describe.each(eachStore)('a 5 MiB JSON answer on %s', (_storeName, store) => {
  it.each(['usage-last', 'usage-first'])(
    'reaches the client whole, and is charged the usage it says (%s)',
    async (variant) => {
      expect(answers[variant]!.length).toBeGreaterThan(5 * 1_048_576);
      const upstream = await largeAnswerUpstream();
      const gateway = await gatewayOver(upstream.url, store());
      const answer = await call(gateway, variant);
      expect(answer.status).toBe(200);
      expect(answer.body.equals(answers[variant]!)).toBe(true);
      await expect.poll(() => usedOf(gateway)).toBe(usage.total_tokens);
      expect(await unreadable(gateway)).toBe('0');
    },
  );
});

describe('a large JSON answer', () => {
  it('is charged the default, counted, when it is malformed after its usage', async () => {
    const upstream = await largeAnswerUpstream();
    const gateway = await gatewayOver(upstream.url, {});
    const answer = await call(gateway, 'malformed');
    expect(answer.body.equals(answers.malformed!)).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(7);
    expect(await unreadable(gateway)).toBe('1');
  });

  it('is read to its end and charged its usage when the client hangs up at its first bytes', async () => {
    let letGo!: () => void;
    const upstream = await largeAnswerUpstream(new Promise<void>((resolve) => (letGo = resolve)));
    const gateway = await gatewayOver(upstream.url, {});
    await leaveAfterFirstBytes(gateway.url, '/v1/chat/completions', { 'x-answer': 'usage-last' });
    await expect.poll(() => accessLines(gateway).at(-1)?.outcome).toBe('client_aborted');
    letGo();
    await expect.poll(() => usedOf(gateway)).toBe(usage.total_tokens);
    expect(await unreadable(gateway)).toBe('0');
  });
});
