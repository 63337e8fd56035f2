import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { poolConfig } from '../helpers/pool-gateways.js';
import { auth } from '../helpers/proxy-parts.js';
import { rawExchange, request } from '../helpers/raw-http.js';
import { spawnTarget } from '../helpers/target-processes.js';
import { accessLines, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type SeenRequest, type TestUpstream } from '../helpers/upstream.js';

/**
 * Issue 44's acceptance: a pool's targets are processes of their own, and each fails as real ones do:
 * killed (SIGKILL, by its pid) while GETs flow, hung (it accepts, and never answers), refusing, slow,
 * answering 503. proxyTimeout bounds the whole exchange, retries included, on the gateway's timers: the
 * test moves them, and the real time it takes never decides the outcome (proxyTimeout is a minute).
 * And what a client smuggles in its head toward a target (a Host, a field Connection names) reaches none
 * of the targets an exchange is sent to.
 */
const defer = cleanupAfterEach();
const proxyTimeout = 60_000;

async function gatewayWith(upstream: Record<string, unknown>, clock?: FakeClock): Promise<TestGateway> {
  const config = { ...poolConfig(upstream), proxyTimeout };
  const gateway = await startTestGateway(config, {}, clock ? { timers: clock } : {});
  defer(() => gateway.close());
  return gateway;
}

const get = (gateway: TestGateway, path = '/pets/1') => request(gateway.url, { path, headers: auth });

/** The access lines of the requests whose path holds `tag`. */
const linesOf = (gateway: TestGateway, tag: string) =>
  accessLines(gateway).filter(({ path }) => String(path).includes(tag));

describe('a pool whose targets are processes', () => {
  it('gives no error to GETs when a target is killed with requests in flight and more coming', async () => {
    const [doomed, well] = [await spawnTarget(defer), await spawnTarget(defer)];
    const gateway = await gatewayWith({ targets: [doomed.url, well.url] });
    // Round-robin: the 1st and 3rd go to the target to be killed, which holds them.
    const inFlight = [1, 2, 3, 4].map((n) => get(gateway, `/pets/hold-${n}`));
    await vi.waitFor(() => expect(doomed.held()).toBe(2));
    await vi.waitFor(() => expect(well.held()).toBe(2));
    await doomed.kill();
    // The exchanges held by the killed target were cut before any answer: they go to the other.
    await vi.waitFor(() => expect(well.held()).toBe(4));
    well.answerHeld();
    const after = [];
    for (let i = 0; i < 20; i += 1) after.push(await get(gateway, `/pets/after-${i}`));
    const answers = [...(await Promise.all(inFlight)), ...after];
    expect(answers.map(({ status }) => status)).toEqual(Array(24).fill(200));
    expect(new Set(answers.map(({ body }) => body.replace('late ', '')))).toEqual(
      new Set([`from ${well.pid}`]),
    );
    await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(24));
    expect(new Set(accessLines(gateway).map(({ target }) => target))).toEqual(new Set([well.url]));
  });

  it('gives no error to 40 GETs in flight when the target holding half of them is killed', async () => {
    const [doomed, well] = [await spawnTarget(defer), await spawnTarget(defer)];
    const gateway = await gatewayWith({ targets: [doomed.url, well.url] });
    const inFlight = Array.from({ length: 40 }, (_, n) => get(gateway, `/pets/hold-${n}`));
    await vi.waitFor(() => expect(doomed.held()).toBe(20));
    await vi.waitFor(() => expect(well.held()).toBe(20));
    await doomed.kill();
    // Twenty connections reset at once, each with a GET the target may have taken: all sent on within
    // the retry budget's reserve, for the API has not been sending a fifth of its exchanges again.
    await vi.waitFor(() => expect(well.held()).toBe(40));
    well.answerHeld();
    const answers = await Promise.all(inFlight);
    expect(answers.map(({ status }) => status)).toEqual(Array(40).fill(200));
    await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(40));
    expect(accessLines(gateway).filter(({ tried }) => tried === 2)).toHaveLength(20);
  });

  it.each(['round-robin', 'least-requests'])(
    'gives no error to 40 GETs at once when a target was killed (%s): a refused one is sent on past the budget',
    async (balance) => {
      const [doomed, well] = [await spawnTarget(defer), await spawnTarget(defer)];
      const gateway = await gatewayWith({ targets: [doomed.url, well.url], balance });
      await doomed.kill();
      // Each sent to the killed target first was refused, nothing of it sent: far more retries at once
      // than the budget's 20% of the exchanges in flight, none of them sending a request twice.
      const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => get(gateway, `/pets/${i}`)));
      expect(answers.map(({ status }) => status)).toEqual(Array(40).fill(200));
      await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(40));
      expect(accessLines(gateway).filter(({ tried }) => tried === 2).length).toBeGreaterThan(8);
    },
  );

  it('ends an exchange to a hung target at proxyTimeout on the gateway timers: 504, not sent again', async () => {
    const clock = new FakeClock();
    const [hung, well] = [await spawnTarget(defer, 'hang'), await spawnTarget(defer)];
    const gateway = await gatewayWith({ targets: [hung.url, well.url] }, clock);
    let status = 0;
    const answer = get(gateway, '/pets/hung').then((res) => (status = res.status));
    await vi.waitFor(() => expect(hung.held()).toBe(1));
    await clock.advance(proxyTimeout - 1);
    expect(status).toBe(0);
    await clock.advance(1);
    expect(await answer).toBe(504);
    // A request the target may have taken is not sent to another once its time is up.
    expect(well.received).toEqual([]);
    await vi.waitFor(() => expect(hung.held()).toBe(0));
    await vi.waitFor(() => expect(linesOf(gateway, 'hung')).toHaveLength(1));
    expect(linesOf(gateway, 'hung')[0]).toMatchObject({
      status: 504,
      outcome: 'timeout',
      target: hung.url,
      tried: 1,
    });
  });

  it('bounds the whole exchange, the retry included, by proxyTimeout from its start: 503, then hung', async () => {
    const clock = new FakeClock();
    const [down, hung] = [await spawnTarget(defer, '503'), await spawnTarget(defer, 'hang')];
    const gateway = await gatewayWith({ targets: [down.url, hung.url] }, clock);
    let status = 0;
    const answer = get(gateway, '/pets/retried').then((res) => (status = res.status));
    await vi.waitFor(() => expect(hung.held()).toBe(1));
    expect(down.received).toEqual(['/retried']);
    await clock.advance(proxyTimeout - 1);
    expect(status).toBe(0);
    await clock.advance(1);
    expect(await answer).toBe(504);
    await vi.waitFor(() => expect(hung.held()).toBe(0));
    await vi.waitFor(() => expect(linesOf(gateway, 'retried')).toHaveLength(1));
    expect(linesOf(gateway, 'retried')[0]).toMatchObject({
      status: 504,
      outcome: 'timeout',
      target: hung.url,
      tried: 2,
    });
  });

  it('leaves no timer of proxyTimeout behind an exchange once a target has answered', async () => {
    const clock = new FakeClock();
    const [down, well] = [await spawnTarget(defer, '503'), await spawnTarget(defer)];
    const gateway = await gatewayWith({ targets: [down.url, well.url] }, clock);
    await get(gateway, '/pets/first');
    const pending = clock.pending;
    // Half of them are sent on from the target answering 503: each try's end is an answer.
    for (let i = 0; i < 10; i += 1) expect((await get(gateway, `/pets/${i}`)).status).toBe(200);
    expect(clock.pending).toBe(pending);
  });

  it('waits for a slow target that answers within proxyTimeout, and sends the GET nowhere else', async () => {
    const clock = new FakeClock();
    const [slow, well] = [await spawnTarget(defer), await spawnTarget(defer)];
    const gateway = await gatewayWith({ targets: [slow.url, well.url] }, clock);
    const answer = get(gateway, '/pets/hold-slow');
    await vi.waitFor(() => expect(slow.held()).toBe(1));
    await clock.advance(proxyTimeout - 1);
    slow.answerHeld();
    expect(await answer).toMatchObject({ status: 200, body: `late from ${slow.pid}` });
    expect(well.received).toEqual([]);
    await vi.waitFor(() => expect(linesOf(gateway, 'slow')).toHaveLength(1));
    expect(linesOf(gateway, 'slow')[0]).toMatchObject({ status: 200, target: slow.url, tried: 1 });
  });

  it('never sends a POST on when its target is killed after its body went out', async () => {
    const [doomed, well] = [await spawnTarget(defer, 'hang'), await spawnTarget(defer)];
    const gateway = await gatewayWith({ targets: [doomed.url, well.url] });
    const answer = request(gateway.url, {
      method: 'POST',
      path: '/pets',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"name":"rex"}',
    });
    await vi.waitFor(() => expect(doomed.held()).toBe(1));
    await doomed.kill();
    // Nothing answered it: 503, as when no target could be reached; the other target never saw it.
    expect((await answer).status).toBe(503);
    expect(well.received).toEqual([]);
    await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(1));
    expect(accessLines(gateway)[0]).toMatchObject({ target: doomed.url, tried: 1 });
  });

  it('takes a hung target out after two checks that time out: the GETs that follow all go elsewhere', async () => {
    const clock = new FakeClock();
    const healthCheck = {
      path: '/healthz',
      interval: 1_000,
      timeout: 500,
      unhealthyAfter: 2,
      healthyAfter: 2,
    };
    const [hung, well] = [await spawnTarget(defer, 'hang'), await spawnTarget(defer)];
    const gateway = await gatewayWith({ targets: [hung.url, well.url], healthCheck }, clock);
    // The first check runs as the gateway starts, the second one interval later: each of the hung
    // target's times out. The clock moves on once the checks under way are over (their I/O is real):
    // a check still under way is not run again, and the well target's must not time out.
    await vi.waitFor(() => expect(well.checksClosed()).toBe(1));
    await clock.advance(healthCheck.timeout);
    await vi.waitFor(() => expect(hung.checksClosed()).toBe(1));
    await clock.advance(healthCheck.interval - healthCheck.timeout);
    await vi.waitFor(() => expect(well.checksClosed()).toBe(2));
    await clock.advance(healthCheck.timeout);
    await vi.waitFor(() =>
      expect(
        gateway.logs.some(
          ({ msg, target }) => msg === 'upstream target out: its health checks fail' && target === hung.url,
        ),
      ).toBe(true),
    );
    const answers = [];
    for (let i = 0; i < 10; i += 1) answers.push(await get(gateway, `/pets/${i}`));
    expect(answers.map(({ status }) => status)).toEqual(Array(10).fill(200));
    expect(hung.received).toEqual([]);
  });

  it('answers every GET across a target refusing, one answering 503 and one well', async () => {
    const [refusing, down, well] = [
      await spawnTarget(defer),
      await spawnTarget(defer, '503'),
      await spawnTarget(defer),
    ];
    await refusing.stopListening();
    const gateway = await gatewayWith({ targets: [refusing.url, down.url, well.url] });
    const answers = [];
    for (let i = 0; i < 12; i += 1) answers.push(await get(gateway, `/pets/${i}`));
    expect(answers.map(({ status }) => status)).toEqual(Array(12).fill(200));
    expect(new Set(answers.map(({ body }) => body))).toEqual(new Set([`from ${well.pid}`]));
    expect(refusing.received).toEqual([]);
    await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(12));
    expect(new Set(accessLines(gateway).map(({ target }) => target))).toEqual(new Set([well.url]));
  });
});

/** Two recording targets, the first answering 503 so that each exchange is sent on to the second. */
async function recordingTargets(): Promise<[TestUpstream, TestUpstream]> {
  const down = await startUpstream((_req, res) => res.writeHead(503).end('down'));
  defer(() => down.close());
  const echo = await startUpstream();
  defer(() => echo.close());
  return [down, echo];
}

/** One request written as it is on a connection of its own; what the gateway answered, as it came. */
const raw = (gateway: TestGateway, head: string) =>
  rawExchange(gateway.url, `${head}Authorization: ${auth.authorization}\r\nConnection: close\r\n\r\n`);

describe('the fields a client smuggles toward a target of a pool', () => {
  it.each([
    ['Connection naming Host', 'GET /pets/1 HTTP/1.1\r\nHost: gw.test\r\nConnection: host\r\n'],
    ['an absolute-form target naming its Host', 'GET http://gw.test/pets/1 HTTP/1.1\r\nHost: gw.test\r\n'],
  ])('gives each target tried its own Host alone, whatever %s', async (_attack, head) => {
    const [down, echo] = await recordingTargets();
    const gateway = await gatewayWith({ targets: [down.url, echo.url] });
    const answer = await raw(gateway, head);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    for (const [target, seen] of [
      [down, down.requests[0]!],
      [echo, echo.requests[0]!],
    ] as const) {
      expect(hostLines(seen)).toEqual([new URL(target.url).host]);
      // The Host the client asked for goes as X-Forwarded-Host, and nowhere else.
      expect(seen.headers['x-forwarded-host']).toBe('gw.test');
      expect(seen.rawHeaders.filter((value) => value.includes('gw.test'))).toHaveLength(1);
    }
    await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(1));
    expect(accessLines(gateway)[0]).toMatchObject({ target: echo.url, tried: 2 });
  });

  it.each([
    ['a second Host', 'GET /pets/1 HTTP/1.1\r\nHost: gw.test\r\nHost: evil.test\r\n'],
    [
      'an absolute-form target naming another host',
      'GET http://evil.test/pets/1 HTTP/1.1\r\nHost: gw.test\r\n',
    ],
  ])('refuses %s with 400 before any target is tried', async (_attack, head) => {
    const [down, echo] = await recordingTargets();
    const gateway = await gatewayWith({ targets: [down.url, echo.url] });
    expect(await raw(gateway, head)).toMatch(/^HTTP\/1\.1 400 /);
    expect([down.requests, echo.requests]).toEqual([[], []]);
  });

  it('answers pipelined requests in order, each sent on from the target answering 503 alone', async () => {
    const [down, echo] = await recordingTargets();
    const gateway = await gatewayWith({ targets: [down.url, echo.url] });
    const one = (n: number, last: boolean) =>
      `GET /pets/${n} HTTP/1.1\r\nHost: gw.test\r\nAuthorization: ${auth.authorization}\r\n` +
      (last ? 'Connection: close\r\n\r\n' : '\r\n');
    const answer = await rawExchange(gateway.url, one(1, false) + one(2, false) + one(3, true));
    const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map(([, status]) => status);
    expect(statuses).toEqual(['200', '200', '200']);
    const urls = [...answer.matchAll(/"url":"([^"]+)"/g)].map(([, url]) => url);
    expect(urls).toEqual(['/1', '/2', '/3']);
    await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(3));
    expect(accessLines(gateway).map(({ path, target }) => [path, target])).toEqual([
      ['/pets/1', echo.url],
      ['/pets/2', echo.url],
      ['/pets/3', echo.url],
    ]);
  });

  it('keeps the gateway X-Forwarded-For when Connection names it, and drops the client one', async () => {
    const [down, echo] = await recordingTargets();
    const gateway = await gatewayWith({ targets: [down.url, echo.url] });
    const head =
      'GET /pets/1 HTTP/1.1\r\nHost: gw.test\r\nConnection: x-forwarded-for\r\nX-Forwarded-For: 6.6.6.6\r\n';
    expect(await raw(gateway, head)).toMatch(/^HTTP\/1\.1 200 /);
    for (const seen of [down.requests[0]!, echo.requests[0]!]) {
      expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(seen.rawHeaders.join('\n')).not.toContain('6.6.6.6');
    }
  });
});

/** The Host lines a target received, as they came. */
const hostLines = (seen: SeenRequest) =>
  seen.rawHeaders.filter((_, i) => i % 2 === 1 && seen.rawHeaders[i - 1]!.toLowerCase() === 'host');
