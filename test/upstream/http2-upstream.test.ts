import type { IncomingHttpHeaders } from 'node:http';
import http2, { type ServerHttp2Stream } from 'node:http2';
import type { Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import {
  headEndedStream,
  Http2Upstream,
  idleSessionMs,
  streamsPerConnection,
  streamWindowBytes,
} from '../../src/upstream/http2-upstream.js';
import { ReplayableBody } from '../../src/upstream/replayable-body.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock } from '../helpers/fake-clock.js';
import {
  grpcHead,
  startShapedGrpcUpstream,
  type ShapedGrpcUpstream,
} from '../helpers/shaped-grpc-upstream.js';

/**
 * The HTTP/2 connections to a gRPC API's upstream: every byte of an answer before its trailers, calls
 * sharing connections up to a bound of streams, none held back by another's slow reader, and
 * connections kept between calls for a while.
 */
const defer = cleanupAfterEach();

function upstreamOf(target: ShapedGrpcUpstream, clock = new FakeClock()): Http2Upstream {
  const connections = new Http2Upstream(target.url, 5_000, clock);
  defer(() => connections.destroy());
  return connections;
}

interface Told {
  status: number;
  bytes: number;
  /** The trailers, once the end was told. */
  trailers: IncomingHttpHeaders | null;
  error: Error | null;
}

/**
 * A handler as the proxy's exchange is one: it pauses after each chunk, as when its client has not
 * taken it yet, and resumes on the next turn of the event loop.
 */
function pausingHandler(told: Told, ended: () => void): Dispatcher.DispatchHandler {
  return {
    onRequestStart: () => undefined,
    onResponseStart: (_controller, status) => (told.status = status),
    onResponseData(controller, chunk) {
      told.bytes += chunk.length;
      controller.pause();
      setImmediate(() => controller.resume());
    },
    onResponseEnd(_controller, trailers) {
      told.trailers = trailers;
      ended();
    },
    onResponseError(_controller, error) {
      told.error = error;
      ended();
    },
  };
}

/** One call (a POST with no body), told to a pausing handler; resolves once it has ended or failed. */
function call(connections: Http2Upstream): Promise<Told> {
  const told: Told = { status: 0, bytes: 0, trailers: null, error: null };
  return new Promise((resolve) => {
    connections.dispatch(
      {
        method: 'POST',
        path: '/helloworld.Greeter/ListHellos',
        headers: ['content-type', 'application/grpc'],
        body: null,
      },
      pausingHandler(told, () => resolve(told)),
    );
  });
}

describe('the HTTP/2 connections to a gRPC upstream', () => {
  it("tells an answer's end, with its trailers, only after every byte before them, however slowly they are taken", async () => {
    // Much more than a stream's buffer, sent at once, and the trailers right behind it.
    const body = Buffer.alloc(1_000_000, 7);
    const target = await startShapedGrpcUpstream((stream) => {
      stream.respond(grpcHead(), { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'x-served-by': 'shaped' }));
      stream.end(body);
    }, defer);
    const told = await call(upstreamOf(target));
    expect(told).toEqual({
      status: 200,
      bytes: body.length,
      trailers: { 'grpc-status': '0', 'x-served-by': 'shaped' },
      error: null,
    });
  });

  it('says whether the head ended the stream: a trailers-only answer, not a head with an empty end', async () => {
    const target = await startShapedGrpcUpstream((stream, headers) => {
      if (headers['x-answer'] === 'trailers-only') {
        stream.respond(grpcHead({ 'grpc-status': '5' }), { endStream: true });
        return;
      }
      // The same head, and the stream ended by an empty DATA frame after it.
      stream.respond(grpcHead({ 'grpc-status': '5' }));
      stream.end();
    }, defer);
    const connections = upstreamOf(target);
    const ended = (answer: string) =>
      new Promise<boolean>((resolve) => {
        let atHead = false;
        connections.dispatch(
          { method: 'POST', path: '/a', headers: ['x-answer', answer], body: null },
          {
            onRequestStart: () => undefined,
            onResponseStart: (controller) => (atHead = headEndedStream(controller)),
            onResponseEnd: () => resolve(atHead),
          },
        );
      });
    expect(await ended('trailers-only')).toBe(true);
    expect(await ended('head then end')).toBe(false);
  });

  it('tells a stream its upstream reset with CANCEL mid-answer as a failure, not as its end', async () => {
    const target = await startShapedGrpcUpstream((stream) => {
      // Waiting for trailers, the stream's end sends no END_STREAM: the reset is all that comes.
      stream.respond(grpcHead(), { waitForTrailers: true });
      stream.write(Buffer.alloc(10), () => setImmediate(() => stream.close(http2.constants.NGHTTP2_CANCEL)));
    }, defer);
    const told = await call(upstreamOf(target));
    expect(told).toMatchObject({ status: 200, bytes: 10, trailers: null });
    expect(told.error?.message).toBe('the upstream reset its stream (code 8)');
  });

  it('puts calls in flight on one connection, and keeps it for the next call', async () => {
    const held: ServerHttp2Stream[] = [];
    const target = await startShapedGrpcUpstream((stream) => held.push(stream), defer);
    const connections = upstreamOf(target);
    const calls = Array.from({ length: 20 }, () => call(connections));
    await expect.poll(() => held.length).toBe(20);
    expect(connections.inFlight()).toBe(20);
    expect(new Set(held.map((stream) => stream.session)).size).toBe(1);
    for (const stream of held.splice(0))
      stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
    await Promise.all(calls);
    // A call is in flight until its stream has closed, just after its end was told.
    await expect.poll(() => connections.inFlight()).toBe(0);
    const next = call(connections);
    await expect.poll(() => held.length).toBe(1);
    held[0]!.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
    expect((await next).trailers).toEqual({});
    expect(target.sessions()).toBe(1);
  });

  it("opens another connection only when those open carry the streams the upstream's SETTINGS allow", async () => {
    const held: ServerHttp2Stream[] = [];
    const target = await startShapedGrpcUpstream((stream) => held.push(stream), defer, {
      maxConcurrentStreams: 5,
    });
    const connections = upstreamOf(target);
    const calls = Array.from({ length: 20 }, () => call(connections));
    await expect.poll(() => held.length).toBe(20);
    expect(target.sessions()).toBe(4);
    const perSession = new Map<object, number>();
    for (const { session } of held) perSession.set(session!, (perSession.get(session!) ?? 0) + 1);
    expect([...perSession.values()]).toEqual([5, 5, 5, 5]);
    for (const stream of held.splice(0))
      stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
    expect((await Promise.all(calls)).map(({ status }) => status)).toEqual(Array(20).fill(200));
  });

  it('carries streamsPerConnection calls on a connection at most, however many its upstream allows', async () => {
    const held: ServerHttp2Stream[] = [];
    const target = await startShapedGrpcUpstream((stream) => held.push(stream), defer);
    const connections = upstreamOf(target);
    const calls = Array.from({ length: streamsPerConnection + 1 }, () => call(connections));
    await expect.poll(() => held.length).toBe(streamsPerConnection + 1);
    expect(target.sessions()).toBe(2);
    for (const stream of held.splice(0))
      stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
    await Promise.all(calls);
  });

  it('never stalls a call behind another on its connection whose reader stopped, however much that one is sent', async () => {
    const large = Buffer.alloc(4_000_000, 7);
    const target = await startShapedGrpcUpstream((stream, headers) => {
      stream.respond(grpcHead(), { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(headers[':path'] === '/large' ? large : large.subarray(0, 1_000_000));
    }, defer);
    const connections = upstreamOf(target);
    // The first call's reader takes one chunk, and no more.
    let stoppedAt = 0;
    connections.dispatch(
      { method: 'POST', path: '/large', headers: [], body: null },
      {
        onRequestStart: () => undefined,
        onResponseData(controller, chunk) {
          stoppedAt += chunk.length;
          controller.pause();
        },
      },
    );
    await expect.poll(() => stoppedAt).toBeGreaterThan(0);
    const second = await call(connections);
    expect(second).toMatchObject({ status: 200, bytes: 1_000_000, error: null });
    expect(target.sessions()).toBe(1);
    expect(stoppedAt).toBeLessThan(large.length);
  });

  it("opens the connection window to streamsPerConnection streams' windows: paused streams can never fill it", async () => {
    const windows: number[] = [];
    const target = await startShapedGrpcUpstream((stream) => {
      windows.push(stream.session!.state.remoteWindowSize!);
      stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
    }, defer);
    expect((await call(upstreamOf(target))).status).toBe(200);
    expect(windows).toEqual([streamsPerConnection * streamWindowBytes]);
  });

  it('puts no new call on a connection its upstream sent GOAWAY', async () => {
    const held: ServerHttp2Stream[] = [];
    const target = await startShapedGrpcUpstream((stream) => held.push(stream), defer);
    const connections = upstreamOf(target);
    const first = call(connections);
    await expect.poll(() => held.length).toBe(1);
    const [leaving] = held.splice(0);
    leaving!.session!.goaway(http2.constants.NGHTTP2_NO_ERROR, leaving!.id);
    // The PING's answer comes once the gateway has read the GOAWAY sent before it.
    await new Promise((resolve) => leaving!.session!.ping(resolve));
    const second = call(connections);
    await expect.poll(() => held.length).toBe(1);
    expect(held[0]!.session).not.toBe(leaving!.session);
    for (const stream of [leaving!, held[0]!])
      stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
    expect((await Promise.all([first, second])).map(({ status }) => status)).toEqual([200, 200]);
    expect(target.sessions()).toBe(2);
  });

  it('fails a stream its upstream refused (REFUSED_STREAM, RFC 9113 §8.7) as not processed, its body kept', async () => {
    const target = await startShapedGrpcUpstream(
      (stream) => stream.close(http2.constants.NGHTTP2_REFUSED_STREAM),
      defer,
    );
    const told = await call(upstreamOf(target));
    expect(told.error).toMatchObject({ code: 'UPSTREAM_STREAM_REFUSED', bodyKept: true });
  });

  it("says a refused call's body is not kept once more than the bytes kept of it were read", async () => {
    const target = await startShapedGrpcUpstream(
      (stream) => stream.close(http2.constants.NGHTTP2_REFUSED_STREAM),
      defer,
    );
    const connections = upstreamOf(target);
    const refusedWith = (chunks: string[]) =>
      new Promise<Error | null>((resolve) => {
        async function* source(): AsyncGenerator<Buffer> {
          for (const chunk of chunks) yield Buffer.from(chunk);
        }
        connections.dispatch(
          { method: 'POST', path: '/a', headers: [], body: new ReplayableBody(source(), 8) as never },
          { onRequestStart: () => undefined, onResponseError: (_controller, error) => resolve(error) },
        );
      });
    expect(await refusedWith(['1234', '5678'])).toMatchObject({
      code: 'UPSTREAM_STREAM_REFUSED',
      bodyKept: true,
    });
    expect(await refusedWith(['1234', '5678', '9'])).toMatchObject({
      code: 'UPSTREAM_STREAM_REFUSED',
      bodyKept: false,
    });
  });

  it('fails the calls for an upstream whose SETTINGS allow no stream as refused, opening no more connections', async () => {
    const target = await startShapedGrpcUpstream(() => undefined, defer, { maxConcurrentStreams: 0 });
    const connections = upstreamOf(target);
    const told = await Promise.all([call(connections), call(connections)]);
    expect(told.map(({ error }) => (error as NodeJS.ErrnoException | null)?.code)).toEqual([
      'UPSTREAM_STREAM_REFUSED',
      'UPSTREAM_STREAM_REFUSED',
    ]);
    expect(target.sessions()).toBe(1);
    expect(connections.inFlight()).toBe(0);
  });

  it('closes a kept connection that no call took for idleSessionMs', async () => {
    const closed: string[] = [];
    const target = await startShapedGrpcUpstream((stream) => {
      stream.session!.once('close', () => closed.push('session'));
      stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
    }, defer);
    const clock = new FakeClock();
    const connections = upstreamOf(target, clock);
    expect((await call(connections)).status).toBe(200);
    await clock.advance(idleSessionMs - 1);
    expect(closed).toEqual([]);
    await clock.advance(1);
    await expect.poll(() => closed).toEqual(['session']);
  });
});
