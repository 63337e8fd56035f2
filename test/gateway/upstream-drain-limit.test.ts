import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore } from '../helpers/enforcement-gateways.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { leaveAfterFirstBytes, startSlowAnswerUpstream } from '../helpers/leaving-clients.js';
import { anthropicPaths, llmApis, openAiTokens, tokens, unreadable, usedOf } from '../helpers/llm-gateway.js';
import { anthropicEvents } from '../helpers/llm-upstream.js';
import {
  accessLines,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { upstreamDrainCapMs } from '../../src/upstream/upstream-proxy.js';

/**
 * `upstreamDrainLimit` (issue 42, point 9): the answers a gateway reads to their end after their clients
 * left, for what a throttleunits restriction charges, are bounded. Past the limit the oldest is cut: its
 * upstream request is aborted, and it is charged what its body said before the cut, else `default`.
 */
const defer = cleanupAfterEach();

/** A slow upstream, stopped after the test. */
async function slowUpstream(contentType: string, first: string, rest: string) {
  const upstream = await startSlowAnswerUpstream(contentType, first, rest);
  defer(() => upstream.close());
  return upstream;
}

async function gatewayOver(
  upstreamUrl: string,
  config: Record<string, unknown>,
  restriction: Record<string, unknown>,
  timers: FakeTimers,
): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig(upstreamUrl, { apis: llmApis(upstreamUrl), ...config }),
    {},
    { timers },
  );
  defer(() => gateway.close());
  await setQuota(gateway, { type: 'API', name: 'System', restrictions: [restriction] }, systemQuotaId);
  return gateway;
}

/** `count` calls that leave one after another, each once the gateway has seen the one before leave. */
async function leaveOneAfterAnother(gateway: TestGateway, path: string, count: number, from = 0) {
  for (let call = from; call < from + count; call += 1) {
    await leaveAfterFirstBytes(gateway.url, path, { 'x-call': String(call) });
    await expect
      .poll(() => accessLines(gateway).filter((line) => line.outcome === 'client_aborted').length)
      .toBe(call + 1);
  }
}

const drainsCut = async (gateway: TestGateway) => {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  return /^quotagate_upstream_drains_cut_total (\d+)$/m.exec(text)?.[1];
};

/** A chat completion's first bytes without its usage, and the rest, which says 31 tokens. */
const beforeUsage = '{"id":"chatcmpl-1","choices":[{"message":{"role":"assistant","content":"hal';
const afterUsage = 'lo"}}],"usage":{"total_tokens":31}}';

describe.each(eachStore)('answers read after their clients left, on %s', (_storeName, store) => {
  it('are cut oldest first past upstreamDrainLimit: the upstream sees the oldest aborted, and it is charged default', async () => {
    const upstream = await slowUpstream('application/json', beforeUsage, afterUsage);
    const timers = new FakeTimers();
    const gateway = await gatewayOver(
      upstream.url,
      { ...store(), upstreamDrainLimit: 2 },
      tokens({ body: openAiTokens, default: 7 }),
      timers,
    );
    await leaveOneAfterAnother(gateway, '/v1/chat/completions', 2);
    // Within the limit: both are read, none is cut.
    expect([...upstream.open].sort()).toEqual(['0', '1']);
    expect(await drainsCut(gateway)).toBe('0');
    await leaveOneAfterAnother(gateway, '/v1/chat/completions', 1, 2);
    await expect.poll(() => upstream.cut).toEqual(['0']);
    expect([...upstream.open].sort()).toEqual(['1', '2']);
    expect(await drainsCut(gateway)).toBe('1');
    await expect.poll(() => usedOf(gateway)).toBe(7);
    expect(await unreadable(gateway)).toBe('1');
    // The cut one's cap timer went with it: the two read still have theirs, and no time has passed.
    expect(timers.waiting().filter((ms) => ms === upstreamDrainCapMs)).toHaveLength(2);
    upstream.letGo();
    await expect.poll(() => upstream.open.size).toBe(0);
    await expect.poll(() => usedOf(gateway)).toBe(7 + 2 * 31);
    expect(upstream.cut).toEqual(['0']);
    expect(await drainsCut(gateway)).toBe('1');
  });
});

describe('an answer cut past upstreamDrainLimit', () => {
  it('is charged the usage its JSON body said before the cut, not default', async () => {
    const upstream = await slowUpstream(
      'application/json',
      '{"usage":{"total_tokens":31},"choices":[{"message":{"content":"hal',
      'lo"}}]}',
    );
    const gateway = await gatewayOver(
      upstream.url,
      { upstreamDrainLimit: 1 },
      tokens({ body: openAiTokens, default: 7 }),
      new FakeTimers(),
    );
    await leaveOneAfterAnother(gateway, '/v1/chat/completions', 2);
    await expect.poll(() => upstream.cut).toEqual(['0']);
    expect([...upstream.open]).toEqual(['1']);
    await expect.poll(() => usedOf(gateway)).toBe(31);
    expect(await unreadable(gateway)).toBe('0');
    expect(await drainsCut(gateway)).toBe('1');
    upstream.letGo();
    await expect.poll(() => usedOf(gateway)).toBe(2 * 31);
  });

  it("is charged what an event stream's events said before the cut: Anthropic's input tokens", async () => {
    const upstream = await slowUpstream(
      'text/event-stream',
      anthropicEvents[0]!.toString(),
      anthropicEvents.slice(1).join(''),
    );
    const gateway = await gatewayOver(
      upstream.url,
      { upstreamDrainLimit: 1 },
      tokens({ body: anthropicPaths, default: 7 }),
      new FakeTimers(),
    );
    await leaveOneAfterAnother(gateway, '/v1/messages', 2);
    await expect.poll(() => upstream.cut).toEqual(['0']);
    // message_start says 25 input tokens; the output tokens came after the cut.
    await expect.poll(() => usedOf(gateway)).toBe(25);
    expect(await unreadable(gateway)).toBe('0');
    upstream.letGo();
    await expect.poll(() => usedOf(gateway)).toBe(25 + 25 + 15);
  });

  it('is told apart from one the 5-minute cap gave up: that is charged default, and not counted as cut', async () => {
    const upstream = await slowUpstream('application/json', beforeUsage, afterUsage);
    const timers = new FakeTimers();
    const gateway = await gatewayOver(
      upstream.url,
      { upstreamDrainLimit: 2 },
      tokens({ body: openAiTokens, default: 7 }),
      timers,
    );
    await leaveOneAfterAnother(gateway, '/v1/chat/completions', 2);
    timers.advance(upstreamDrainCapMs);
    await expect.poll(() => [...upstream.cut].sort()).toEqual(['0', '1']);
    await expect.poll(() => usedOf(gateway)).toBe(2 * 7);
    expect(await unreadable(gateway)).toBe('2');
    expect(await drainsCut(gateway)).toBe('0');
    // The reads the cap ended made room: a client that leaves now is read, and cuts nobody.
    await leaveOneAfterAnother(gateway, '/v1/chat/completions', 1, 2);
    expect([...upstream.open]).toEqual(['2']);
    expect(await drainsCut(gateway)).toBe('0');
    upstream.letGo();
    await expect.poll(() => usedOf(gateway)).toBe(2 * 7 + 31);
  });

  it('is cut against the limit a reload put in force', async () => {
    const upstream = await slowUpstream('application/json', beforeUsage, afterUsage);
    const config = (limit: number) =>
      petsConfig(upstream.url, { apis: llmApis(upstream.url), upstreamDrainLimit: limit });
    const gateway = await gatewayOver(
      upstream.url,
      { upstreamDrainLimit: 3 },
      tokens({ body: openAiTokens, default: 7 }),
      new FakeTimers(),
    );
    await leaveOneAfterAnother(gateway, '/v1/chat/completions', 3);
    expect(upstream.cut).toEqual([]);
    expect((await gateway.reloadWith(config(1))).applied).toBe(true);
    await leaveOneAfterAnother(gateway, '/v1/chat/completions', 1, 3);
    // Cut at once, oldest first: the upstream hears of the three in any order.
    await expect.poll(() => [...upstream.cut].sort()).toEqual(['0', '1', '2']);
    expect([...upstream.open]).toEqual(['3']);
    expect(await drainsCut(gateway)).toBe('3');
    await expect.poll(() => usedOf(gateway)).toBe(3 * 7);
    upstream.letGo();
  });
});
