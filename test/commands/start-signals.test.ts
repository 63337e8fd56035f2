import { existsSync, readFileSync, renameSync } from 'node:fs';
import type { ClientHttp2Stream } from 'node:http2';
import type { ServerResponse } from 'node:http';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startCliGateway, type CliGateway } from '../helpers/cli-gateway.js';
import { http2Session } from '../helpers/http2-client.js';
import { listeningAddresses } from '../helpers/listening-addresses.js';
import { chatStream, llmApis, openAiTokens, post } from '../helpers/llm-gateway.js';
import { startLlmUpstream } from '../helpers/llm-upstream.js';
import { request } from '../helpers/raw-http.js';
import { basicAuth, devKey, petsConfig, setQuota, systemQuotaId } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { closed, echo, mustOpen, startWebSocketUpstream, wsUrl } from '../helpers/websockets.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/**
 * The signals an operator sends to `gateway start` (systemd's stop, logrotate's postrotate), through the
 * real CLI, with `workers: 1` (the default: the data plane in a thread) and `workers: 2`. SIGTERM with a
 * WebSocket open, an HTTP/2 stream open and an LLM answer still read for its units after its client left;
 * SIGUSR2 after the access log file was moved.
 */
const defer = cleanupAfterEach();
const tempDirs = useTempDirs('quotagate-signals-');
const withKey = { authorization: basicAuth(devKey) };

/** An upstream that answers `/held/…` with its head and `head `, and the rest only when the test says. */
async function startHeldUpstream(): Promise<
  TestUpstream & { held: ServerResponse[]; ended: Promise<string> }
> {
  const held: ServerResponse[] = [];
  let ended!: (how: string) => void;
  const endedOnce = new Promise<string>((resolve) => (ended = resolve));
  const upstream = await startUpstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('head ');
    held.push(res);
    res.on('close', () => ended(res.writableFinished ? 'finished' : 'cut off'));
  });
  return { ...upstream, held, ended: endedOnce };
}

/**
 * A gateway of `workers` over a WebSocket upstream (Pet Store), a held one (`/held`) and an LLM API whose
 * stream waits before its second event until `letGo`; its tokens are charged (so its answer is read to
 * its end after its client left).
 */
async function gatewayWithOpenExchanges(workers: number, shutdownTimeout: number) {
  const web = await startWebSocketUpstream();
  defer(() => web.close());
  const held = await startHeldUpstream();
  defer(() => held.close());
  let letGo!: () => void;
  const gate = new Promise<void>((resolve) => (letGo = resolve));
  const llm = await startLlmUpstream({ beforeEvent: (index) => (index === 1 ? gate : undefined) });
  defer(() => llm.close());
  const pets = petsConfig(web.url).apis as object[];
  const heldApi = {
    id: '6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d',
    name: 'Held',
    basePath: '/held',
    upstream: held.url,
    methods: [{ id: '6a5b4c3d-2e1f-4a0b-9c8d-000000000001', name: 'hold', verb: 'GET', path: '/{id}' }],
  };
  const gateway = await startCliGateway(
    petsConfig(web.url, {
      workers,
      shutdownTimeout,
      accessLog: { flushMs: 0 },
      apis: [...pets, heldApi, ...llmApis(llm.url)],
    }),
    defer,
  );
  const tokens = {
    api: '*',
    method: '*',
    type: 'throttleunits',
    config: { units: 1_000, per: 1, period: 'hour', default: 7, body: openAiTokens },
  };
  await setQuota(gateway, { type: 'API', name: 'System', restrictions: [tokens] }, systemQuotaId);
  return { gateway, web, held, llm, letGo };
}

/** Opens the three exchanges and waits until each runs: the WebSocket echoes, the stream has its head, the LLM client has left. */
async function openExchanges(gateway: CliGateway) {
  const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
  expect(await echo(ws, 'before')).toBe('before');
  const session = await http2Session(gateway.url);
  defer(() => session.destroy());
  const stream: ClientHttp2Stream = session.request({ ':path': '/held/1', ...withKey });
  stream.setEncoding('utf8');
  let received = '';
  stream.on('data', (chunk: string) => (received += chunk));
  stream.on('error', () => undefined);
  // A stream reset, or cut with its session, has a code other than NO_ERROR (0) when it closes.
  const streamEnded = new Promise<string>((resolve) =>
    stream.on('close', () => resolve(stream.rstCode ? 'reset' : `ended: ${received}`)),
  );
  await new Promise<void>((resolve) => stream.once('data', () => resolve()));
  // The client hangs up after the first event: the gateway goes on reading for the tokens.
  await post(gateway, '/v1/chat/completions', chatStream, {
    onEvent: (_index, req) => req.destroy(),
  });
  await gateway.until(() => gateway.accessLines().some((line) => line.outcome === 'client_aborted'));
  return { ws, stream, streamEnded };
}

describe.each([1, 2])('SIGTERM to gateway start with workers: %i', (workers) => {
  it('ends what is still open at the end of the grace period: the WebSocket with 1001, the HTTP/2 stream and the answer read for its units cut upstream, each logged', async () => {
    const { gateway, web, held, llm } = await gatewayWithOpenExchanges(workers, 1_000);
    const { ws, streamEnded } = await openExchanges(gateway);
    const wsEnded = closed(ws);
    const upstreamWsEnded = closed(web.sockets[0]!);
    const llmUpstreamClosed = new Promise<void>((resolve) => llm.requests[0]!.socket.once('close', resolve));
    gateway.cli.child.kill('SIGTERM');
    const result = await gateway.cli.exited;
    expect(result.code).toBe(0);
    expect(await wsEnded).toEqual({ code: 1001, reason: 'gateway shutting down' });
    expect(await streamEnded).toBe('reset');
    // What the upstreams saw: each of the three closed by the gateway.
    expect((await upstreamWsEnded).code).toBe(1001);
    expect(await held.ended).toBe('cut off');
    await llmUpstreamClosed;
    expect(
      gateway.logs().filter((line) => line.msg === 'grace period over, closing open requests'),
    ).toHaveLength(workers);
    const lines = gateway.accessLines();
    expect(lines.map((line) => [line.api, line.status, line.webSocket ?? line.outcome]).sort()).toEqual([
      ['Held', 200, 'client_aborted'],
      ['LLM', 200, 'client_aborted'],
      ['Pet Store', 101, 'shutdown'],
    ]);
  }, 60_000);

  it('exits as soon as what was open ends within the grace period, each exchange whole and logged', async () => {
    // A grace period longer than the test: only the exchanges' ends can let it exit in time.
    const { gateway, held, llm, letGo } = await gatewayWithOpenExchanges(workers, 120_000);
    const { ws, streamEnded } = await openExchanges(gateway);
    gateway.cli.child.kill('SIGTERM');
    await gateway.until(
      () => gateway.logs().filter((line) => line.msg === 'worker draining').length === workers,
    );
    // Draining: the data-plane port stops listening, new connections are refused, what is open goes on.
    // With workers: N the primary holds the port for its workers and closes it once the last of them
    // closed its listener: a connection made before that may be handed to a worker in the very instant
    // it closes, and node:cluster then holds it until the gateway exits (nodejs/node#21746).
    const port = Number(new URL(gateway.url).port);
    await vi.waitFor(() => expect(listeningAddresses(port)).toEqual([]), { timeout: 10_000, interval: 20 });
    await expect(request(gateway.url, { path: '/pets/1', headers: withKey })).rejects.toThrow();
    expect(await echo(ws, 'during the drain')).toBe('during the drain');
    held.held[0]!.end('tail');
    letGo();
    ws.close(1000);
    const result = await gateway.cli.exited;
    expect(result.code).toBe(0);
    expect(await streamEnded).toBe('ended: head tail');
    expect(await held.ended).toBe('finished');
    expect(llm.requests).toHaveLength(1);
    expect(result.stdout).not.toContain('grace period over');
    const lines = gateway.accessLines();
    expect(lines.map((line) => [line.api, line.status, line.webSocket ?? line.outcome]).sort()).toEqual([
      ['Held', 200, 'completed'],
      ['LLM', 200, 'client_aborted'],
      ['Pet Store', 101, 'closed'],
    ]);
  }, 60_000);
});

describe.each([1, 2])('SIGUSR2 to gateway start with workers: %i', (workers) => {
  it('opens accessLog.file again after logrotate moved it: the lines before are in the moved file, the lines after in a new one', async () => {
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const logs = tempDirs.make();
    const file = path.join(logs, 'access.log');
    const gateway = await startCliGateway(
      petsConfig(upstream.url, { workers, accessLog: { file, flushMs: 0 } }),
      defer,
    );
    const requestIds = (of: string) =>
      existsSync(of)
        ? readFileSync(of, 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((line) => (JSON.parse(line) as { requestId: string }).requestId)
        : [];
    const get = (id: string) =>
      request(gateway.url, { path: '/pets/1', headers: { ...withKey, 'x-request-id': id } });
    for (const id of ['before-1', 'before-2']) expect((await get(id)).status).toBe(200);
    await expect.poll(() => requestIds(file)).toEqual(['before-1', 'before-2']);
    renameSync(file, `${file}.1`);
    gateway.cli.child.kill('SIGUSR2');
    // The file is there again once a data plane has opened it; a scrape of /metrics asks every worker,
    // over the channel the primary sent them SIGUSR2's word on, so each of them has opened it too.
    await expect.poll(() => existsSync(file)).toBe(true);
    expect((await fetch(`${gateway.adminUrl}/metrics`)).status).toBe(200);
    for (const id of ['after-1', 'after-2', 'after-3']) expect((await get(id)).status).toBe(200);
    await expect.poll(() => requestIds(file)).toEqual(['after-1', 'after-2', 'after-3']);
    expect(requestIds(`${file}.1`)).toEqual(['before-1', 'before-2']);
    // Nothing of it goes to stdout.
    expect(gateway.accessLines()).toEqual([]);
  }, 60_000);
});
