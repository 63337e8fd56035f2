import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startHoldingUpstream, type HoldingUpstream } from '../helpers/holding-upstream.js';
import { http2Session } from '../helpers/http2-client.js';
import { serverKind } from '../helpers/otlp-receiver.js';
import { accessLines, basicAuth, devKey, petsConfig } from '../helpers/test-gateway.js';
import { endedOnce, startTracedGateway, type TracedGateway } from '../helpers/traced-endings.js';
import { spanKind } from '../helpers/trace-trees.js';

/**
 * An HTTP/2 client that says it is done (GOAWAY NO_ERROR, and a graceful `close`) while the upstream's
 * answer to one of its streams is still pending: no error, so the stream is answered to its end; the
 * exchange's server span ends once, beside its one access line, and the upstream holds nothing after.
 */
const defer = cleanupAfterEach();

async function setUp(): Promise<TracedGateway & { upstream: HoldingUpstream }> {
  const upstream = await startHoldingUpstream();
  defer(() => upstream.close());
  const traced = await startTracedGateway(petsConfig(upstream.url), defer);
  return { ...traced, upstream };
}

/** A request tagged `id` on `session`, which the upstream holds; resolves with the answer once it ends. */
function heldGet(session: ClientHttp2Session, id: string) {
  const stream = session.request({
    ':path': '/pets/1',
    authorization: basicAuth(devKey),
    'x-request-id': id,
  });
  stream.end();
  let headers: IncomingHttpHeaders = {};
  let body = '';
  stream.setEncoding('utf8');
  stream.on('response', (received) => (headers = received));
  stream.on('data', (chunk: string) => (body += chunk));
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    stream.on('error', reject);
    stream.on('close', () => resolve({ status: Number(headers[':status'] ?? 0), body }));
  });
}

/** Sends GOAWAY NO_ERROR; resolves once the gateway has read it (a PING after it is acknowledged). */
async function goaway(session: ClientHttp2Session): Promise<void> {
  session.goaway(http2.constants.NGHTTP2_NO_ERROR);
  await new Promise<void>((resolve, reject) => session.ping((error) => (error ? reject(error) : resolve())));
}

const goingAway = {
  'GOAWAY NO_ERROR': goaway,
  // A closed session sends no PING: the GOAWAY is read first, then the session is closed gracefully (it
  // waits for its open streams).
  'GOAWAY NO_ERROR and a graceful close': async (session: ClientHttp2Session) => {
    await goaway(session);
    session.close();
  },
};

describe.each(Object.keys(goingAway) as Array<keyof typeof goingAway>)(
  'an HTTP/2 client that sends %s with an answer pending',
  (how) => {
    it('is answered to the end; the server span ends once, with the access line, and the upstream holds nothing', async () => {
      const setup = await setUp();
      const session = await http2Session(setup.gateway.url);
      defer(() => session.destroy());
      const id = `goaway-${how.replaceAll(' ', '-')}`;
      const answer = heldGet(session, id);
      await expect.poll(() => setup.upstream.held()).toBe(1);
      await goingAway[how](session);
      expect(accessLines(setup.gateway)).toHaveLength(0);
      setup.upstream.answerOne();
      expect(await answer).toEqual({ status: 200, body: 'done' });
      expect(setup.upstream.held()).toBe(0);
      const ended = await endedOnce(setup, [id]);
      const { line, span } = ended.get(id)!;
      expect(line).toMatchObject({ status: 200, outcome: 'completed', protocol: 'HTTP/2' });
      expect(span.attributes).toMatchObject({
        'network.protocol.version': '2',
        'quotagate.decision': 'admitted',
        'quotagate.upstream.outcome': 'completed',
      });
      expect(span.attributes['http.response.body.size']).toBe(4);
      // One server span per access line, and one client span of the try, ended once.
      const { spans } = setup.receiver;
      expect(spans.filter((one) => one.kind === serverKind)).toHaveLength(accessLines(setup.gateway).length);
      const clients = spans.filter((one) => one.traceId === span.traceId && one.kind === spanKind.client);
      expect(clients).toHaveLength(1);
      expect(clients[0]!.attributes['quotagate.upstream.outcome']).toBe('completed');
    });
  },
);
