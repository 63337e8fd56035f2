import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  dataFrame,
  errorCode,
  errorOf,
  frameType,
  headersFrame,
  openRawHttp2,
  requestFields,
  statusOf,
  type RawHttp2Connection,
  type ReceivedFrame,
} from '../../helpers/http2-frames.js';
import { http2Fetch } from '../../helpers/http2-client.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../../helpers/test-gateway.js';
import {
  startRawUpstream,
  startUpstream,
  type RawUpstream,
  type TestUpstream,
} from '../../helpers/upstream.js';

let upstream: TestUpstream;
let gateway: TestGateway;
let authority: string;
const auth = ['authorization', basicAuth(devKey)] as const;
const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: upstream\r\n\r\n';

beforeAll(async () => {
  upstream = await startUpstream();
  gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, { accessLog: { flushMs: 0 }, server: { maxHeaderSize: 4_096 } }),
  );
  authority = new URL(gateway.url).host;
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

const port = (of: TestGateway) => Number(new URL(of.url).port);
const connections: RawHttp2Connection[] = [];
afterAll(() => connections.forEach((connection) => connection.close()));

async function connect(to: TestGateway = gateway): Promise<RawHttp2Connection> {
  const connection = await openRawHttp2(port(to));
  connections.push(connection);
  return connection;
}

/** The server's first answer to stream 1: its response HEADERS, a RST_STREAM, or a GOAWAY. */
const answerTo1 = (connection: RawHttp2Connection): Promise<ReceivedFrame> =>
  connection.frame(
    (received) =>
      (received.streamId === 1 &&
        (received.type === frameType.headers || received.type === frameType.rstStream)) ||
      received.type === frameType.goaway,
  );

/** Sends one GET of /pets/1 with `extra` fields on a new connection; returns the server's answer. */
async function getWith(extra: ReadonlyArray<readonly [string, string]>): Promise<ReceivedFrame> {
  const connection = await connect();
  connection.send(
    headersFrame(1, requestFields(authority, '/pets/1', [auth, ...extra]), { endStream: true }),
  );
  return answerTo1(connection);
}

describe('HTTP/2 streams that HTTP/1.1 could not carry as one request', () => {
  it.each([
    ['transfer-encoding', 'chunked'],
    ['connection', 'keep-alive'],
    ['keep-alive', 'timeout=5'],
    ['upgrade', 'websocket'],
    ['proxy-connection', 'keep-alive'],
    ['te', 'gzip'],
  ])(
    'resets a stream with the connection-specific field %s: %s, and sends nothing upstream',
    async (name, value) => {
      const before = upstream.requests.length;
      const answer = await getWith([[name, value]]);
      expect(answer.type).toBe(frameType.rstStream);
      expect(errorOf(answer)).toBe(errorCode.protocol);
      expect(upstream.requests.length).toBe(before);
    },
  );

  it('resets a stream with an upper-case field name, and sends nothing upstream', async () => {
    const before = upstream.requests.length;
    const answer = await getWith([['X-Smuggle', '1']]);
    expect([answer.type, errorOf(answer)]).toEqual([frameType.rstStream, errorCode.protocol]);
    expect(upstream.requests.length).toBe(before);
  });

  it('resets a stream with two host fields, and sends nothing upstream', async () => {
    const before = upstream.requests.length;
    const answer = await getWith([
      ['host', authority],
      ['host', 'other.test'],
    ]);
    expect([answer.type, errorOf(answer)]).toEqual([frameType.rstStream, errorCode.protocol]);
    expect(upstream.requests.length).toBe(before);
  });

  it.each([
    ['a CR and LF in a value', 'x-note', `a\r\n${smuggled}`],
    ['an LF in a value', 'x-note', 'a\nx-injected: 1'],
    ['a NUL in a value', 'x-note', 'a\0b'],
    ['a CR and LF in a name', 'x-note\r\nx-injected', '1'],
  ])('forwards a stream with %s as one request without that field', async (_case, name, value) => {
    const before = upstream.requests.length;
    const answer = await getWith([[name, value]]);
    expect([answer.type, statusOf(answer)]).toEqual([frameType.headers, 200]);
    expect(upstream.requests.length).toBe(before + 1);
    const seen = upstream.requests.at(-1)!;
    expect(seen.url).toBe('/pets/1');
    expect(seen.rawHeaders.join('\n')).not.toMatch(/x-note|x-injected|smuggled/i);
  });

  it('joins two authorization fields as HTTP/1.1 does, so that neither is believed: 401, nothing upstream', async () => {
    const before = upstream.requests.length;
    const answer = await getWith([auth, ['authorization', basicAuth('another-key-0123456789abcdef01')]]);
    expect(answer.type).toBe(frameType.headers);
    expect(upstream.requests.length).toBe(before);
    await vi.waitFor(() => expect(accessLines(gateway).at(-1)).toMatchObject({ status: 401 }));
  });

  it('resets (ENHANCE_YOUR_CALM) a stream whose header list is larger than server.maxHeaderSize, and sends nothing upstream', async () => {
    const before = upstream.requests.length;
    const connection = await connect();
    // The limit holds once the client has acknowledged the server's SETTINGS, which say it.
    await connection.frame((received) => received.type === frameType.settings);
    connection.send(
      headersFrame(1, requestFields(authority, '/pets/1', [auth, ['x-large', 'x'.repeat(8_000)]]), {
        endStream: true,
      }),
    );
    const answer = await answerTo1(connection);
    expect([answer.type, errorOf(answer)]).toEqual([frameType.rstStream, errorCode.enhanceYourCalm]);
    expect(upstream.requests.length).toBe(before);
  });

  it('refuses :authority and host that disagree with 400, and logs it', async () => {
    const before = upstream.requests.length;
    const answer = await getWith([['host', 'other.test']]);
    expect([answer.type, statusOf(answer)]).toEqual([frameType.headers, 400]);
    expect(upstream.requests.length).toBe(before);
    // The line is written once the stream has closed, which may be after its answer reached the client.
    await vi.waitFor(() =>
      expect(accessLines(gateway).at(-1)).toMatchObject({ status: 400, path: '/pets/1' }),
    );
  });

  it('forwards a host that names :authority in another case', async () => {
    const answer = await getWith([['host', authority.toUpperCase()]]);
    expect(statusOf(answer)).toBe(200);
  });

  it.each([
    ['OPTIONS', '*', 'headers', 400],
    ['GET', '*', 'rstStream', errorCode.protocol],
    ['GET', `http://${'other.test'}/pets/1`, 'rstStream', errorCode.protocol],
    ['GET', 'pets/1', 'rstStream', errorCode.protocol],
  ] as const)(
    'answers %s with :path %s by %s %d, and sends nothing upstream',
    async (method, path, type, code) => {
      const before = upstream.requests.length;
      const connection = await connect();
      connection.send(headersFrame(1, requestFields(authority, path, [auth], method), { endStream: true }));
      const answer = await answerTo1(connection);
      expect(answer.type).toBe(frameType[type]);
      expect(type === 'headers' ? statusOf(answer) : errorOf(answer)).toBe(code);
      expect(upstream.requests.length).toBe(before);
    },
  );

  it('answers CONNECT with 405 from Node, and sends nothing upstream', async () => {
    const before = upstream.requests.length;
    const answer = await http2Fetch(gateway.url, {
      method: 'CONNECT',
      path: '',
      headers: { authorization: auth[1], ':authority': authority },
    }).catch((error: unknown) => error);
    expect(answer).toMatchObject({ status: 405 });
    expect(upstream.requests.length).toBe(before);
  });
});

describe('an HTTP/2 body that contradicts its content-length', () => {
  let raw: RawUpstream;
  let overRaw: TestGateway;

  beforeAll(async () => {
    raw = await startRawUpstream();
    overRaw = await startTestGateway(petsConfig(`${raw.url}/pets`));
  });

  afterAll(async () => {
    await overRaw.close();
    await raw.close();
  });

  it.each([
    ['longer', '5', `hello${smuggled}`],
    ['shorter', '100', 'hello'],
  ])(
    'resets a stream whose body is %s than its content-length in the same read, and sends nothing upstream',
    async (_case, length, body) => {
      const before = upstream.requests.length;
      const connection = await connect();
      connection.send(
        headersFrame(1, requestFields(authority, '/pets', [auth, ['content-length', length]], 'POST')),
        dataFrame(1, body, { endStream: true }),
      );
      const answer = await answerTo1(connection);
      expect([answer.type, errorOf(answer)]).toEqual([frameType.rstStream, errorCode.protocol]);
      expect(upstream.requests.length).toBe(before);
    },
  );

  it('cuts the one upstream request when DATA goes past content-length: the rest never reaches the upstream', async () => {
    const connection = await connect(overRaw);
    const overAuthority = new URL(overRaw.url).host;
    connection.send(
      headersFrame(1, requestFields(overAuthority, '/pets', [auth, ['content-length', '5']], 'POST')),
    );
    connection.send(dataFrame(1, 'hello'));
    await raw.seen('hello');
    connection.send(dataFrame(1, smuggled, { endStream: true }));
    const answer = await answerTo1(connection);
    expect([answer.type, errorOf(answer)]).toEqual([frameType.rstStream, errorCode.protocol]);
    await raw.closedAfter('hello');
    const sent = raw.received.join('');
    expect(sent).not.toContain('/smuggled');
    expect(sent.match(/^POST \/pets HTTP\/1\.1/gm)).toHaveLength(1);
  });

  it('cuts the one upstream request when the stream ends before content-length', async () => {
    const connection = await connect(overRaw);
    const overAuthority = new URL(overRaw.url).host;
    const sentBefore = raw.received.join('').length;
    connection.send(
      headersFrame(1, requestFields(overAuthority, '/pets', [auth, ['content-length', '100']], 'POST')),
    );
    connection.send(dataFrame(1, 'short-body'));
    await raw.seen('short-body');
    connection.send(dataFrame(1, '', { endStream: true }));
    const answer = await answerTo1(connection);
    expect([answer.type, errorOf(answer)]).toEqual([frameType.rstStream, errorCode.protocol]);
    await raw.closedAfter('short-body');
    const sent = raw.received.join('').slice(sentBefore);
    expect(sent.match(/^POST \/pets HTTP\/1\.1/gm)).toHaveLength(1);
    expect(sent).toMatch(/content-length: 100\r\n/i);
  });
});
