import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { http2Request, http2Session } from '../helpers/http2-client.js';
import {
  chat,
  openAiTokens,
  post,
  startLlmGateway,
  tokens,
  unreadable,
  usedOf,
} from '../helpers/llm-gateway.js';
import { openAiJson, openAiJsonTokens, type LlmUpstreamOptions } from '../helpers/llm-upstream.js';
import { basicAuth, devKey } from '../helpers/test-gateway.js';

/**
 * Attacks on what an LLM API's answers are charged (docs/security.md): a client that wants its tokens
 * free or cheap, and one that wants to hurt the gateway while it reads answers for their units.
 */
const defer = cleanupAfterEach();

const gatewayOver = (
  restrictions: Array<Record<string, unknown>>,
  config: Record<string, unknown> = {},
  options: LlmUpstreamOptions = {},
) => startLlmGateway(defer, config, restrictions, options);

describe('a client that asks for a compressed answer', () => {
  it('gets an identity answer when a restriction reads the body, and is charged what it says', async () => {
    const { gateway, upstream } = await gatewayOver([tokens({ body: openAiTokens })]);
    const answer = await post(gateway, '/v1/chat/completions', chat, {
      headers: { 'accept-encoding': 'gzip, br', 'x-answer': 'negotiated' },
    });
    expect(upstream.requests.at(-1)!.headers['accept-encoding']).toBe('identity');
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect(answer.body.equals(openAiJson)).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(openAiJsonTokens);
    expect(await unreadable(gateway)).toBe('0');
  });

  it('gets an identity answer over HTTP/2 too', async () => {
    const { gateway, upstream } = await gatewayOver([tokens({ body: openAiTokens })]);
    const session = await http2Session(gateway.url);
    defer(() => void session.close());
    const answer = await http2Request(session, {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: {
        authorization: basicAuth(devKey),
        'content-type': 'application/json',
        'accept-encoding': 'gzip, deflate, br',
        'x-answer': 'negotiated',
      },
      body: JSON.stringify(chat),
    });
    expect(upstream.requests.at(-1)!.headers['accept-encoding']).toBe('identity');
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect(answer.body).toBe(openAiJson.toString('utf8'));
    await expect.poll(() => usedOf(gateway)).toBe(openAiJsonTokens);
  });

  it('keeps its Accept-Encoding when no restriction reads the body', async () => {
    const { gateway, upstream } = await gatewayOver([tokens({ header: 'X-Tokens' })]);
    const answer = await post(gateway, '/v1/chat/completions', chat, {
      headers: { 'accept-encoding': 'gzip, br', 'x-answer': 'negotiated' },
    });
    expect(upstream.requests.at(-1)!.headers['accept-encoding']).toBe('gzip, br');
    expect(gunzipSync(answer.body).equals(openAiJson)).toBe(true);
  });
});
