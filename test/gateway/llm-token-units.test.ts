import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore, startFleetOfTwo } from '../helpers/enforcement-gateways.js';
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
  largeAnswer,
  openAiEvents,
  openAiJson,
  openAiJsonTokens,
  openAiStreamTokens,
  startLlmUpstream,
  type LlmUpstreamOptions,
} from '../helpers/llm-upstream.js';
import {
  accessLines,
  basicAuth,
  devKey,
  setQuota,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';

/**
 * throttleunits reading what an LLM API says it cost from the answer body (`body`): OpenAI's JSON answer
 * and its stream with `include_usage`, Anthropic's Messages stream; a client that leaves early still
 * pays; events go through as they come, whether or not a restriction reads them.
 */
const defer = cleanupAfterEach();

/** Whether `receipt` settles within `ms` of real time: the bound of a test on a gateway that holds back. */
const receivedWithin = (receipt: Promise<void>, ms: number) =>
  new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    void receipt.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });

const gatewayOver = (
  store: Record<string, unknown>,
  restrictions: Array<Record<string, unknown>>,
  upstreamOptions: LlmUpstreamOptions = {},
) => startLlmGateway(defer, store, restrictions, upstreamOptions).then(({ gateway }) => gateway);

describe.each(eachStore)('an LLM API limited by tokens on %s', (_storeName, store) => {
  it("charges the usage of OpenAI's JSON answer, which reaches the client as it was sent", async () => {
    const gateway = await gatewayOver(store(), [tokens({ body: openAiTokens })]);
    const answer = await post(gateway, '/v1/chat/completions', chat);
    expect(answer.status).toBe(200);
    expect(answer.body.equals(openAiJson)).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(openAiJsonTokens);
    expect(await unreadable(gateway)).toBe('0');
  });

  it("charges the usage of the last chunk of OpenAI's stream with include_usage", async () => {
    const gateway = await gatewayOver(store(), [tokens({ body: openAiTokens })]);
    const answer = await post(gateway, '/v1/chat/completions', chatStream);
    expect(answer.body.equals(Buffer.concat(openAiEvents))).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(openAiStreamTokens);
  });

  it("charges the input tokens of Anthropic's message_start and the output tokens of its last message_delta", async () => {
    const gateway = await gatewayOver(store(), [tokens({ body: anthropicPaths })]);
    const answer = await post(gateway, '/v1/messages', messages);
    expect(answer.body.equals(Buffer.concat(anthropicEvents))).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(anthropicTokens);
  });

  it('charges a client that hangs up after the first event what the stream ended with', async () => {
    let letGo!: () => void;
    const gate = new Promise<void>((resolve) => (letGo = resolve));
    const gateway = await gatewayOver(store(), [tokens({ body: anthropicPaths })], {
      beforeEvent: (index) => (index === 1 ? gate : undefined),
    });
    const answer = await post(gateway, '/v1/messages', messages, {
      onEvent: (_index, req) => req.destroy(),
    });
    expect(answer.body.equals(anthropicEvents[0]!)).toBe(true);
    await expect.poll(() => accessLines(gateway).at(-1)?.outcome).toBe('client_aborted');
    letGo();
    await expect.poll(() => usedOf(gateway)).toBe(anthropicTokens);
    expect(await unreadable(gateway)).toBe('0');
  });

  it('charges the default of a malformed body, and counts it', async () => {
    const gateway = await gatewayOver(store(), [tokens({ body: openAiTokens })]);
    const answer = await post(gateway, '/v1/chat/completions', chat, {
      headers: { 'x-answer': 'malformed' },
    });
    expect(answer.body.equals(openAiJson.subarray(0, -20))).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(7);
    expect(await unreadable(gateway)).toBe('1');
  });
});

describe('an LLM API limited by tokens', () => {
  it('charges the header when the answer has it, and the body when it has not', async () => {
    const gateway = await gatewayOver({}, [tokens({ header: 'X-Tokens', body: openAiTokens })]);
    await post(gateway, '/v1/chat/completions', chat, { headers: { 'x-answer': 'with-header' } });
    await expect.poll(() => usedOf(gateway)).toBe(3);
    await post(gateway, '/v1/chat/completions', chat);
    await expect.poll(() => usedOf(gateway)).toBe(3 + openAiJsonTokens);
  });

  it('keeps the count when the same path is written as a list, and starts another for other paths', async () => {
    const gateway = await gatewayOver({}, [tokens({ body: openAiTokens })]);
    await post(gateway, '/v1/chat/completions', chat);
    await expect.poll(() => usedOf(gateway)).toBe(openAiJsonTokens);
    const system = (body: unknown) =>
      setQuota(gateway, { type: 'API', name: 'System', restrictions: [tokens({ body })] }, systemQuotaId);
    await system([openAiTokens]);
    expect(await usedOf(gateway)).toBe(openAiJsonTokens);
    await system('usage.prompt_tokens');
    expect(await usedOf(gateway)).toBe(0);
  });

  it('charges the default of a compressed body, which is not read, and counts it', async () => {
    const gateway = await gatewayOver({}, [tokens({ body: openAiTokens })]);
    const answer = await post(gateway, '/v1/chat/completions', chat, { headers: { 'x-answer': 'gzip' } });
    expect(answer.headers['content-encoding']).toBe('gzip');
    await expect.poll(() => usedOf(gateway)).toBe(7);
    expect(await unreadable(gateway)).toBe('1');
  });

  it('passes a 5 MB answer whole, and charges the usage it says at its end', async () => {
    expect(largeAnswer.length).toBeGreaterThan(5_000_000);
    const gateway = await gatewayOver({}, [tokens({ body: openAiTokens })]);
    const answer = await post(gateway, '/v1/chat/completions', chat, { headers: { 'x-answer': 'large' } });
    expect(answer.body.length).toBe(largeAnswer.length);
    expect(answer.body.equals(largeAnswer)).toBe(true);
    await expect.poll(() => usedOf(gateway)).toBe(1);
    expect(await unreadable(gateway)).toBe('0');
  });

  describe.each([
    ['without a body restriction', { type: 'throttle', config: { messages: 100, per: 1, period: 'hour' } }],
    ['with a body restriction', tokens({ body: anthropicPaths })],
  ])('hands each event to the client before the upstream sends the next, %s', (_name, restriction) => {
    it('in lockstep: the upstream sends an event only once the client has received the one before', async ({
      annotate,
    }) => {
      const sentAt: number[] = [];
      const receivedAt: number[] = [];
      const receipts = anthropicEvents.map(() => {
        let received!: () => void;
        const promise = new Promise<void>((resolve) => (received = resolve));
        return { promise, received };
      });
      // For each event after the first: had the client received the one before when the upstream came
      // to send it? A gateway that held events back fails here (after 5 s, once, not per event) rather
      // than at the test's timeout.
      const passedOn: boolean[] = [];
      const gateway = await gatewayOver({}, [{ api: '*', method: '*', ...restriction }], {
        async beforeEvent(index) {
          if (index > 0) {
            const held = passedOn.includes(false);
            passedOn.push(held ? false : await receivedWithin(receipts[index - 1]!.promise, 5_000));
          }
          sentAt[index] = performance.now();
        },
      });
      const answer = await post(gateway, '/v1/messages', messages, {
        onEvent(index) {
          receivedAt[index] = performance.now();
          receipts[index]!.received();
        },
      });
      expect(passedOn).toEqual(anthropicEvents.slice(1).map(() => true));
      expect(answer.body.equals(Buffer.concat(anthropicEvents))).toBe(true);
      expect(receivedAt).toHaveLength(anthropicEvents.length);
      const delays = receivedAt.map((at, index) => at - sentAt[index]!);
      await annotate(
        `upstream write to client receipt per event, ms: ${delays.map((delay) => delay.toFixed(2)).join(' ')}`,
      );
    });
  });
});

describe('an LLM API limited by tokens across a fleet on Redis', () => {
  it("counts one limit for the fleet from OpenAI's and Anthropic's bodies, over by at most the last exchange", async () => {
    const upstream = await startLlmUpstream();
    defer(() => upstream.close());
    const [a, b] = await startFleetOfTwo(defer, { apis: llmApis(upstream.url) }, { upstream });
    // One restriction reads both: OpenAI's total, or Anthropic's input and output tokens.
    await setQuota(
      a,
      {
        type: 'API',
        name: 'System',
        restrictions: [tokens({ units: 100, body: [openAiTokens, ...anthropicPaths], default: 0 })],
      },
      systemQuotaId,
    );
    // In force on both data planes: each one's usage path lists the restriction.
    for (const gateway of [a, b]) {
      await expect
        .poll(async () => {
          const usage = await fetch(`${gateway.url}/_quotagate/usage`, {
            headers: { authorization: basicAuth(devKey) },
          });
          return ((await usage.json()) as { restrictions: unknown[] }).restrictions.length;
        })
        .toBe(1);
    }
    const calls: Array<[TestGateway, string, object, number]> = [
      [a, '/v1/chat/completions', chatStream, openAiStreamTokens],
      [b, '/v1/messages', messages, anthropicTokens],
      [a, '/v1/chat/completions', chat, openAiJsonTokens],
      [b, '/v1/messages', messages, anthropicTokens],
      [a, '/v1/chat/completions', chat, openAiJsonTokens],
      [b, '/v1/messages', messages, anthropicTokens],
    ];
    const statuses: number[] = [];
    let charged = 0;
    for (const [gateway, path, body, cost] of calls) {
      const { status } = await post(gateway, path, body);
      statuses.push(status);
      if (status === 200) charged += cost;
      // Each exchange has ended and been charged before the next one asks.
      await expect.poll(() => usedOf(a)).toBe(charged);
    }
    // 21 + 40 + 29 = 90 leaves room; the next 40 takes the fleet to 130, past the limit.
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    expect(await usedOf(b)).toBe(130);
  });
});
