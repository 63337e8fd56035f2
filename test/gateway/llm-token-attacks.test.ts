import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { gunzipSync } from 'node:zlib';
import { describe, expect, inject, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startFleetOfTwo } from '../helpers/enforcement-gateways.js';
import { http2Request, http2Session } from '../helpers/http2-client.js';
import {
  anthropicPaths,
  chat,
  chatStream,
  llmApis,
  messages,
  openAiTokens,
  post,
  startLlmGateway,
  tokens,
  unreadable,
  usedOf,
} from '../helpers/llm-gateway.js';
import {
  anthropicEvents,
  anthropicTokens,
  openAiEventsWithoutUsage,
  openAiJson,
  openAiJsonTokens,
  startLlmUpstream,
  type LlmUpstreamOptions,
} from '../helpers/llm-upstream.js';
import {
  accessLines,
  basicAuth,
  concurrency,
  devKey,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';

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

describe('an answer that says no usage', () => {
  it('charges the default, counted, for a stream whose client left out include_usage', async () => {
    const { gateway } = await gatewayOver([tokens({ body: openAiTokens })]);
    const { stream_options: _left, ...withoutUsage } = chatStream;
    const answer = await post(gateway, '/v1/chat/completions', withoutUsage);
    expect(answer.body.equals(Buffer.concat(openAiEventsWithoutUsage))).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(7);
    expect(await unreadable(gateway)).toBe('1');
  });

  it.each([
    ['a HEAD request', 'HEAD', {}],
    ['a 204', 'GET', { 'x-status': '204' }],
    ['a 304', 'GET', { 'x-status': '304' }],
  ])('charges the default, counted, for %s, which has no body', async (_name, method, headers) => {
    const { gateway } = await gatewayOver([tokens({ body: openAiTokens })]);
    const answer = await post(gateway, '/v1/models', {}, { method, headers });
    expect(answer.body.length).toBe(0);
    await expect.poll(() => usedOf(gateway)).toBe(7);
    expect(await unreadable(gateway)).toBe('1');
  });
});

describe('the type and status of an answer read for its units', () => {
  it.each(['application/json; charset=utf-8', 'Application/JSON', 'application/vnd.x+json; charset=UTF-8'])(
    'reads a JSON answer of type %s',
    async (type) => {
      const { gateway } = await gatewayOver([tokens({ body: openAiTokens })]);
      await post(gateway, '/v1/chat/completions', chat, { headers: { 'x-content-type': type } });
      await expect.poll(() => usedOf(gateway)).toBe(openAiJsonTokens);
    },
  );

  it('reads an event stream of type Text/Event-Stream; charset=utf-8', async () => {
    const { gateway } = await gatewayOver([tokens({ body: anthropicPaths })]);
    const answer = await post(gateway, '/v1/messages', messages, {
      headers: { 'x-content-type': 'Text/Event-Stream; charset=utf-8' },
    });
    expect(answer.body.equals(Buffer.concat(anthropicEvents))).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(anthropicTokens);
  });

  it('charges the default, counted, for JSON sent as text/plain', async () => {
    const { gateway } = await gatewayOver([tokens({ body: openAiTokens })]);
    await post(gateway, '/v1/chat/completions', chat, { headers: { 'x-content-type': 'text/plain' } });
    await expect.poll(() => usedOf(gateway)).toBe(7);
    expect(await unreadable(gateway)).toBe('1');
  });

  it.each(['400', '429', '500', '503'])('charges what an error answer %s says it cost', async (status) => {
    const { gateway } = await gatewayOver([tokens({ body: openAiTokens })]);
    const answer = await post(gateway, '/v1/chat/completions', chat, { headers: { 'x-status': status } });
    expect(answer.status).toBe(Number(status));
    await expect.poll(() => usedOf(gateway)).toBe(openAiJsonTokens);
    expect(await unreadable(gateway)).toBe('0');
  });
});

describe('an answer with units in a field and in its body', () => {
  it('charges the trailer, not the body', async () => {
    const { gateway } = await gatewayOver([tokens({ header: 'X-Tokens', body: openAiTokens })]);
    const answer = await post(gateway, '/v1/chat/completions', chat, {
      headers: { 'x-answer': 'with-trailer', te: 'trailers' },
    });
    expect(answer.body.equals(openAiJson)).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(3);
    expect(await unreadable(gateway)).toBe('0');
  });
});

/** An upstream option that holds every stream after its first event until `release()`. */
function heldAfterFirstEvent() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  return { release, beforeEvent: (index: number) => (index === 1 ? gate : undefined) };
}

/** `count` Anthropic streams whose clients each hang up at the first event, all at once. */
async function hangUpOnStreams(gateway: TestGateway, count: number) {
  await Promise.all(
    Array.from({ length: count }, () =>
      post(gateway, '/v1/messages', messages, { onEvent: (_index, req) => req.destroy() }),
    ),
  );
  await expect
    .poll(() => accessLines(gateway).filter((line) => line.outcome === 'client_aborted').length)
    .toBe(count);
}

const closingLines = (gateway: TestGateway) =>
  gateway.logs.filter((line) => line.msg === 'grace period over, closing open requests');

describe('answers read after their clients hung up at once', () => {
  it('are each read to their end and charged, and leave nothing in flight', async () => {
    const held = heldAfterFirstEvent();
    const { gateway } = await gatewayOver([tokens({ units: 100_000, body: anthropicPaths })], {}, held);
    await hangUpOnStreams(gateway, 20);
    expect(await usedOf(gateway)).toBe(0);
    held.release();
    await expect.poll(() => usedOf(gateway)).toBe(20 * anthropicTokens);
    expect(await unreadable(gateway)).toBe('0');
    // A read that never ended would keep the shutdown waiting for its grace period.
    await gateway.running.close();
    expect(closingLines(gateway)).toEqual([]);
  });

  it('are cut off when the upstream is silent for proxyTimeout, and charged the default', async () => {
    const held = heldAfterFirstEvent();
    const { gateway } = await gatewayOver([tokens({ body: anthropicPaths })], { proxyTimeout: 300 }, held);
    await hangUpOnStreams(gateway, 3);
    await expect.poll(() => usedOf(gateway)).toBe(3 * 7);
    expect(await unreadable(gateway)).toBe('3');
    held.release();
  });

  it('are given up by a shutdown past its grace period, and charged the default', async () => {
    const held = heldAfterFirstEvent();
    const store = {
      type: 'redis',
      url: inject('redisUrl'),
      prefix: `test:llm:${Date.now()}:${Math.random()}:`,
    };
    const restrictions = [tokens({ body: anthropicPaths })];
    const { gateway: leaving } = await gatewayOver(restrictions, { store, shutdownTimeout: 100 }, held);
    await hangUpOnStreams(leaving, 2);
    await leaving.running.close();
    expect(closingLines(leaving)).toHaveLength(1);
    const { gateway: staying } = await gatewayOver(restrictions, { store });
    expect((await quotaUsage(staying.adminUrl, systemQuotaId)).restrictions[0]!.used).toBe(2 * 7);
    held.release();
  });
});

describe('a concurrency restriction on an LLM API', () => {
  it('holds the slot of a client that hung up until the rest of its answer has been read', async () => {
    const held = heldAfterFirstEvent();
    const { gateway } = await gatewayOver([tokens({ body: anthropicPaths }), concurrency(1)], {}, held);
    await hangUpOnStreams(gateway, 1);
    // The upstream still answers the first call: a second would be two at once.
    expect((await post(gateway, '/v1/chat/completions', chat)).status).toBe(429);
    held.release();
    await expect.poll(() => usedOf(gateway)).toBe(anthropicTokens);
    expect((await post(gateway, '/v1/chat/completions', chat)).status).toBe(200);
  });
});

describe('an HTTP/2 client of an LLM API', () => {
  it('is charged what the stream ended with when it resets its stream after the first event', async () => {
    const held = heldAfterFirstEvent();
    const { gateway } = await gatewayOver([tokens({ body: anthropicPaths })], {}, held);
    const session = await http2Session(gateway.url);
    defer(() => void session.close());
    const stream = session.request({
      ':method': 'POST',
      ':path': '/v1/messages',
      authorization: basicAuth(devKey),
      'content-type': 'application/json',
    });
    stream.on('error', () => undefined);
    stream.end(JSON.stringify(messages));
    await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    stream.close(http2.constants.NGHTTP2_CANCEL);
    await expect.poll(() => accessLines(gateway).at(-1)?.outcome).toBe('client_aborted');
    held.release();
    await expect.poll(() => usedOf(gateway)).toBe(anthropicTokens);
    expect(await unreadable(gateway)).toBe('0');
  });
});

describe('a client that hangs up while it sends its request body', () => {
  it('is charged the default at once, and the upstream request is cut off', async () => {
    let arrived!: () => void;
    const requestArrived = new Promise<void>((resolve) => (arrived = resolve));
    let cut!: () => void;
    const upstreamCut = new Promise<void>((resolve) => (cut = resolve));
    // An upstream told of the request at its head, which waits for the body it was promised.
    const upstream = http.createServer((req) => {
      req.on('close', cut);
      arrived();
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    defer(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const gateway = await startTestGateway(petsConfig(url, { apis: llmApis(url) }));
    defer(() => gateway.close());
    const restrictions = [tokens({ body: openAiTokens })];
    await setQuota(gateway, { type: 'API', name: 'System', restrictions }, systemQuotaId);
    const client = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
    client.on('error', () => undefined);
    client.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: ${basicAuth(devKey)}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":',
    );
    await requestArrived;
    client.destroy();
    await upstreamCut;
    await expect.poll(() => usedOf(gateway)).toBe(7);
    expect(await unreadable(gateway)).toBe('1');
  });
});

describe('a fleet of 2 on Redis in front of an LLM API', () => {
  it('charges one count for a client that hung up on one gateway, read by the other', async () => {
    const held = heldAfterFirstEvent();
    const upstream = await startLlmUpstream(held);
    defer(() => upstream.close());
    const [a, b] = await startFleetOfTwo(defer, { apis: llmApis(upstream.url) }, { upstream });
    const restrictions = [tokens({ body: anthropicPaths })];
    await setQuota(a, { type: 'API', name: 'System', restrictions }, systemQuotaId);
    await hangUpOnStreams(a, 1);
    held.release();
    await expect.poll(() => usedOf(b)).toBe(anthropicTokens);
    expect((await post(b, '/v1/messages', messages)).status).toBe(200);
    await expect.poll(() => usedOf(a)).toBe(2 * anthropicTokens);
  });
});
