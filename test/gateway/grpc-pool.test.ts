import http2 from 'node:http2';
import { status } from '@grpc/grpc-js';
import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { credentials } from '../helpers/grpc-credentials.js';
import {
  greeterApi,
  greeterClient,
  startGreeterUpstream,
  type GreeterUpstream,
} from '../helpers/grpc-greeter.js';
import { grpcHead, helloMessage, startShapedGrpcUpstream } from '../helpers/shaped-grpc-upstream.js';
import { accessLines, petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * A gRPC API with a pool of targets (issue 44): its calls are balanced per call across the targets,
 * share the HTTP/2 connections to each (none held back by another's slow reader), and a call a target
 * could not take (its connection refused, its stream refused) goes to another.
 */
const defer = cleanupAfterEach();

async function gatewayOver(upstream: string | Record<string, unknown>): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig('http://127.0.0.1:9', { apis: [{ ...greeterApi('http://127.0.0.1:9'), upstream }] }),
  );
  defer(() => gateway.close());
  return gateway;
}

const clientOf = (gateway: TestGateway) => {
  const client = greeterClient(new URL(gateway.url).host);
  defer(() => client.close());
  return client;
};

async function greeter(): Promise<GreeterUpstream> {
  const upstream = await startGreeterUpstream();
  defer(() => upstream.close());
  return upstream;
}

const urlOf = (upstream: { address: string }) => `http://${upstream.address}`;

/** A target that refuses every stream (RST_STREAM REFUSED_STREAM): it processed none of them. */
const refusingTarget = () =>
  startShapedGrpcUpstream((stream) => stream.close(http2.constants.NGHTTP2_REFUSED_STREAM), defer);

/** The access lines' `target` and `tried` of the calls, once `count` are logged. */
async function triedOf(gateway: TestGateway, count: number) {
  await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(count));
  return accessLines(gateway).map(({ target, tried }) => ({ target, tried }));
}

describe('the connections of a gRPC upstream', () => {
  it('completes a call while another on the same upstream connection has a client that stopped reading a large stream', async () => {
    const messages = 64;
    const target = await startShapedGrpcUpstream((stream, headers) => {
      stream.respond(grpcHead(), { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      if (headers[':path'] !== '/helloworld.Greeter/ListHellos') {
        stream.end(helloMessage('Hello ann'));
        return;
      }
      // 4 MB, far more than the windows of a stream and of a connection (65,535 bytes each at first).
      for (let i = 0; i < messages; i += 1) stream.write(helloMessage('x'.repeat(64_000)));
      stream.end();
    }, defer);
    const gateway = await gatewayOver(target.url);
    const client = clientOf(gateway);
    const stalled = client.stalledHellos('stalled', 1, credentials());
    defer(() => stalled.cancel());
    await vi.waitFor(() => expect(stalled.replies).toHaveLength(1));

    const outcome = await client.sayHello('ann', credentials());
    expect(outcome.status.code).toBe(status.OK);
    expect(outcome.replies).toEqual([{ message: 'Hello ann' }]);
    expect(target.sessions()).toBe(1);
    expect(stalled.replies.length).toBeLessThan(messages);
  });
});

describe('a gRPC API with a pool of targets', () => {
  it('spreads unary calls across its targets by their weights', async () => {
    const targets = [await greeter(), await greeter(), await greeter()];
    const weights = [1, 2, 3];
    const gateway = await gatewayOver({
      targets: targets.map((target, i) => ({ url: urlOf(target), weight: weights[i] })),
      balance: 'least-requests',
    });
    const client = clientOf(gateway);
    const codes: number[] = [];
    // 300 calls, 30 at a time.
    for (let batch = 0; batch < 10; batch += 1) {
      const outcomes = await Promise.all(
        Array.from({ length: 30 }, (_, i) => client.sayHello(`ann${batch}-${i}`, credentials())),
      );
      codes.push(...outcomes.map(({ status: { code } }) => code));
    }
    expect(new Set(codes)).toEqual(new Set([status.OK]));
    targets.forEach((target, i) => {
      const expected = (300 * weights[i]!) / 6;
      expect(target.calls.length).toBeGreaterThanOrEqual(expected * 0.75);
      expect(target.calls.length).toBeLessThanOrEqual(expected * 1.25);
    });
    const lines = await triedOf(gateway, 300);
    expect(new Set(lines.map(({ target }) => target))).toEqual(new Set(targets.map(urlOf)));
  });

  it('sends calls, under least-requests, to the target with fewer calls in flight', async () => {
    const [busy, idle] = [await greeter(), await greeter()];
    const gateway = await gatewayOver({ targets: [urlOf(busy), urlOf(idle)], balance: 'least-requests' });
    const client = clientOf(gateway);
    // Held open after its replies: it stays in flight on the first target until it is cancelled.
    const held = client.streamHellos('held', credentials());
    await vi.waitFor(() => expect(held.replies).toHaveLength(3));
    for (let i = 0; i < 4; i += 1)
      expect((await client.sayHello('ann', credentials())).status.code).toBe(status.OK);
    expect([busy.calls.length, idle.calls.length]).toEqual([1, 4]);
    held.cancel();
    expect((await held.outcome).status.code).toBe(status.CANCELLED);
  });

  it('sends the calls a killed target cannot take to another: every call is answered OK', async () => {
    const [killed, well] = [await greeter(), await greeter()];
    await killed.close();
    const gateway = await gatewayOver({ targets: [urlOf(killed), urlOf(well)] });
    const client = clientOf(gateway);
    for (let i = 0; i < 4; i += 1)
      expect((await client.sayHello('ann', credentials())).status.code).toBe(status.OK);
    expect(well.calls).toHaveLength(4);
    // Round-robin: the 1st and the 3rd went to the killed target first.
    expect((await triedOf(gateway, 4)).map(({ tried }) => tried)).toEqual([2, 1, 2, 1]);
  });

  it('sends a call whose stream a target refused (REFUSED_STREAM) to another, its messages whole', async () => {
    const [refusing, well] = [await refusingTarget(), await greeter()];
    const gateway = await gatewayOver({ targets: [refusing.url, urlOf(well)] });
    const client = clientOf(gateway);
    const unary = await client.sayHello('ann', credentials());
    expect(unary.status.code).toBe(status.OK);
    expect(unary.replies).toEqual([{ message: 'Hello ann' }]);
    // Round-robin sends the second call to the greeter, the third to the refusing target first.
    expect((await client.gatherHellos(['bob'], credentials())).status.code).toBe(status.OK);
    const gathered = await client.gatherHellos(['cy', 'di', 'ed'], credentials());
    expect(gathered.replies).toEqual([{ message: 'Hello cy, di, ed' }]);
    expect(refusing.opened()).toBe(2);
    expect(await triedOf(gateway, 3)).toEqual([
      { target: urlOf(well), tried: 2 },
      { target: urlOf(well), tried: 1 },
      { target: urlOf(well), tried: 2 },
    ]);
  });

  it('sends a call above the last stream id of a GOAWAY (not processed) to another', async () => {
    const well = await greeter();
    // The first stream of each connection is answered; any after it, the connection goes away below it.
    const leaving = await startShapedGrpcUpstream((stream) => {
      if (stream.id === 1) {
        stream.respond(grpcHead(), { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(helloMessage('Hello from the leaving one'));
        return;
      }
      stream.session!.goaway(http2.constants.NGHTTP2_NO_ERROR, 1);
    }, defer);
    const gateway = await gatewayOver({ targets: [leaving.url, urlOf(well)] });
    const client = clientOf(gateway);
    const replies = [];
    for (let i = 0; i < 3; i += 1) {
      const outcome = await client.sayHello('ann', credentials());
      expect(outcome.status.code).toBe(status.OK);
      replies.push(...outcome.replies);
    }
    expect(replies).toEqual([
      { message: 'Hello from the leaving one' },
      { message: 'Hello ann' },
      { message: 'Hello ann' },
    ]);
    expect((await triedOf(gateway, 3)).map(({ tried }) => tried)).toEqual([1, 1, 2]);
  });

  it("tells outlier detection of a target's answers: a 5xx is a failure, an answer ends the run", async () => {
    const well = await greeter();
    // Its calls are answered 503 (a proxy in front of the server, say), OK, 503, 503, then OK.
    const answers = [503, 200, 503, 503];
    const flaky = await startShapedGrpcUpstream((stream) => {
      if ((answers.shift() ?? 200) === 503) {
        stream.respond({ ':status': 503 }, { endStream: true });
        return;
      }
      stream.respond(grpcHead(), { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(helloMessage('Hello from the flaky one'));
    }, defer);
    const gateway = await gatewayOver({
      targets: [flaky.url, urlOf(well)],
      outlierDetection: { consecutiveFailures: 2, ejectTime: 30_000 },
    });
    const client = clientOf(gateway);
    const ejections = () =>
      gateway.logs.filter(({ msg }) => msg === 'upstream target ejected: its exchanges failed in a row');
    const codes: number[] = [];
    const callMany = async (count: number) => {
      for (let i = 0; i < count; i += 1)
        codes.push((await client.sayHello('ann', credentials())).status.code);
    };
    // Round-robin: the flaky target takes calls 1, 3, 5 and 7.
    await callMany(6);
    expect(ejections()).toEqual([]);
    await callMany(4);
    expect(ejections()).toMatchObject([{ target: flaky.url }]);
    expect(codes).toEqual([14, 0, 0, 0, 14, 0, 14, 0, 0, 0]);
    expect(flaky.opened()).toBe(4);
  });

  it('answers UNAVAILABLE when every target refused the call, and logs the targets tried', async () => {
    const [first, second] = [await refusingTarget(), await refusingTarget()];
    const gateway = await gatewayOver({ targets: [first.url, second.url] });
    const outcome = await clientOf(gateway).sayHello('ann', credentials());
    expect(outcome.status.code).toBe(status.UNAVAILABLE);
    expect([first.opened(), second.opened()]).toEqual([1, 1]);
    expect(gateway.logs.find(({ msg }) => msg === 'upstream exchange failed')).toMatchObject({
      err: { code: 'UPSTREAM_STREAM_REFUSED' },
      targets: [first.url, second.url],
    });
    expect(await triedOf(gateway, 1)).toEqual([{ target: second.url, tried: 2 }]);
  });
});
