import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { latencyBetween, type LatencyReport } from '../src/observe/added-latency.js';
import { runAccuracyBench, type AccuracyResult } from './accuracy.js';
import { cpuSeconds, machineCpuSeconds, treeCpuTime } from './cpu-time.js';
import { runFixedRate, type OpenLoopResult } from './fixed-rate.js';
import { runLoad, type LoadResult } from './load.js';
import { choosePinning } from './pinning.js';
import { startIdentityProvider, type IdentityProvider } from './identity-provider.js';
import { freePort, listening, runThenStop, start, type Running } from './processes.js';
import { benchAuthorization, benchKey } from './quotagate.js';
import { costPerRequest, RedisMeter, type RedisCost } from './redis-usage.js';
import { runRefusalCost, type RefusalCost } from './refusal-cost.js';
import {
  accuracyTable,
  figuresTable,
  gatewayLatencyTable,
  headlineChart,
  headlineTable,
  latencyTable,
  markdownTable,
  median,
  noiseOf,
  refusalTable,
  workersTable,
  type Figure,
  type GatewayLatencyRow,
  type HeadlineRow,
  type LatencyRow,
  type Row,
  type WorkersRow,
} from './report.js';
import { Setups, type Target } from './setups.js';
import { headlineRowOf, ratioOf, runSideBySide, type Ratio, type SideBySideRuns } from './side-by-side.js';
import {
  checkStreamedCharges,
  startStreamedRows,
  streamedCost,
  streamedLayerBelow,
  streamedNames,
  streamedReference,
  streamedText,
} from './streamed-rows.js';

const { values } = parseArgs({
  options: {
    'side-rounds': { type: 'string', default: '20' },
    'side-seconds': { type: 'string', default: '5' },
    'side-connections': { type: 'string', default: '10' },
    'side-warmup-seconds': { type: 'string', default: '60' },
    pin: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '5' },
    'warmup-seconds': { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    'soak-seconds': { type: 'string', default: '60' },
    'skip-accuracy': { type: 'boolean', default: false },
    'latency-rate': { type: 'string', default: '2000' },
    'latency-seconds': { type: 'string', default: '6' },
    'latency-rounds': { type: 'string', default: '9' },
    'skip-latency': { type: 'boolean', default: false },
    'skip-throughput': { type: 'boolean', default: false },
    'skip-workers': { type: 'boolean', default: false },
    'skip-protocols': { type: 'boolean', default: false },
    /** Events of each streamed chat completion of the streamed rows (with the protocol rows). */
    'stream-events': { type: 'string', default: '100' },
    /** A folder holding another build of quotagate (its dist/ and node_modules/), loaded beside this one. */
    baseline: { type: 'string' },
  },
});
const seconds = Number(values.seconds);
const rounds = Math.max(3, Number(values.rounds));
const connections = Number(values.connections);
const latencyRate = Number(values['latency-rate']);
const latencySeconds = Number(values['latency-seconds']);
// Unrecorded lead-in of each open-loop run: its connections are opened under the same schedule.
const latencyWarmupSeconds = 1;

const say = (line: string) => process.stderr.write(`${line}\n`);
const which = (name: string) => {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/sbin']) {
    try {
      execFileSync('test', ['-x', path.join(dir, name)]);
      return path.join(dir, name);
    } catch {
      // not in this folder
    }
  }
  return null;
};
const versionOf = (command: string, args: string[]) => {
  // wrk -v exits 1, and nginx -v prints to stderr: take the first line of whatever they print.
  const { stdout, stderr } = spawnSync(command, args, { encoding: 'utf8' });
  return `${stdout}${stderr}`.split('\n')[0]!.trim();
};

const wrk = which('wrk');
const nginx = which('nginx');
const haproxy = which('haproxy');
const h2loadBinary = which('h2load');
const redisServer = which('redis-server');
if (!redisServer) throw new Error('bench: redis-server is needed (apt-get install -y redis-server)');
const pinning = choosePinning(values.pin);
say(wrk ? `load: wrk (${versionOf(wrk, ['-v'])})` : 'load: wrk not found, using autocannon');
say(nginx ? `nginx: ${versionOf(nginx, ['-v'])}` : 'nginx: not found, using a Node upstream; no nginx rows');
say(haproxy ? `haproxy: ${versionOf(haproxy, ['-v'])}` : 'haproxy: not found, no HAProxy row');
say(
  h2loadBinary
    ? `HTTP/2 load: ${versionOf(h2loadBinary, ['--version'])}`
    : 'h2load: not found (apt-get install -y nghttp2-client), no HTTP/2 rows',
);
say(
  pinning
    ? `side by side: servers on core ${pinning.servers}, load generators and upstream on ${pinning.load}`
    : 'side by side: nothing pinned',
);

/** The setups, by the names the tables give them. */
const names = {
  floor: 'undici floor: http.createServer + undici Pool.stream',
  control: 'control: a second copy of the undici floor',
  bare: 'bare http-proxy-3, keep-alive agent',
  routing: 'quotagate (a) routing + proxy only',
  basic: 'quotagate (b) + basic auth',
  jwt: 'quotagate (b′) + jwt auth instead of basic (one ES256 token, repeated)',
  quotas: 'quotagate (c) + 2 quotas, memory store',
  shipped: 'quotagate (d) + access log = as shipped, memory store',
  baseline: `quotagate as shipped, memory store, baseline build (${values.baseline ?? ''})`,
  bareH2: 'bare node:http2 proxy (h2c) → undici',
  h2: 'quotagate as shipped, HTTP/2 (h2c)',
  bareWs: 'bare http-proxy-3 ws() relay, 64-byte messages',
  wsRelay: 'ws-package relay (each message read and sent on), 64-byte messages',
  ws: 'quotagate as shipped, WebSocket, 64-byte messages',
  redis: 'quotagate as shipped, Redis store',
  pool: 'quotagate as shipped, memory store, 3 upstream targets checked every second',
  alerts: 'quotagate as shipped, memory store, threshold alerts (80% and 100%) to a webhook',
  traced: 'quotagate as shipped, memory store, tracing on (ratio 1) to an OTLP sink',
  sampled: 'quotagate as shipped, memory store, tracing on (ratio 0.01) to an OTLP sink',
  workers: 'quotagate as shipped, memory store, workers: 2',
  peer: 'Node peer: fast-gateway + basic auth + 2 rate-limiter-flexible limiters (memory)',
  peerRedis: 'Node peer: fast-gateway + basic auth + 2 rate-limiter-flexible limiters (Redis)',
  nginx: 'nginx auth_basic + 2 limit_req zones',
  haproxy: 'HAProxy userlist + stick table',
  direct: 'direct to the upstream (nginx return 200)',
  nginxProxy: 'nginx proxy_pass, keep-alive',
} as const;

/** What a row's CPU is compared with in the side-by-side table: the undici floor unless named here. */
const referenceOf: Partial<Record<string, string>> = {
  // A WebSocket message is no request: the bare relay is compared with nothing.
  [names.bareWs]: names.bareWs,
  [names.h2]: names.bareH2,
  [names.ws]: names.bareWs,
  [names.wsRelay]: names.bareWs,
  ...streamedReference,
};
/** Each layer of quotagate, and the layer below it; the jwt row, as basic's, sits on routing alone. */
const layerBelow: Partial<Record<string, string>> = {
  [names.routing]: names.floor,
  [names.basic]: names.routing,
  [names.jwt]: names.routing,
  [names.quotas]: names.basic,
  [names.shipped]: names.quotas,
  // What tracing adds to the same build with it off.
  [names.traced]: names.shipped,
  [names.sampled]: names.shipped,
  ...streamedLayerBelow,
};
/** The reference's short name, for the table. */
const shortNames: Partial<Record<string, string>> = {
  [names.floor]: 'undici floor',
  [names.bareH2]: 'node:http2 proxy',
  [names.bareWs]: 'http-proxy-3 ws() relay',
  [streamedNames.bare]: 'http-proxy-3, streamed',
};

/** What issue 35 asks of the side-by-side ratios (CPU vs the undici floor, at most). */
const targets: Partial<Record<string, number>> = {
  [names.shipped]: 1.25,
  [names.redis]: 1.3,
};

const work = mkdtempSync(path.join(tmpdir(), 'quotagate-bench-'));
const running: Running[] = [];
// Serves the jwt row's JWKS from this process; closed with the servers.
let identityProvider: IdentityProvider | null = null;
const track = async <T extends Running>(what: Promise<T>): Promise<T> => {
  const started = await what;
  running.push(started);
  return started;
};

/** Loaded by requests (HTTP/1.1 or HTTP/2), so comparable with bare http-proxy-3; not by message or event. */
const perRequest = (target: Target) => (target.protocol ?? 'http1') === 'http1' || target.protocol === 'h2';

const streamEvents = Math.max(4, Number(values['stream-events']));

/** CPU µs per request from two readings of CPU seconds; NaN where /proc could not tell. */
const cpuPerRequest = (before: number | null, after: number | null, requests: number) =>
  before === null || after === null ? NaN : ((after - before) * 1e6) / Math.max(1, requests);
const headers = { authorization: benchAuthorization };

/** The added latency a quotagate setup reports (`/latency`), or null for another setup. */
async function latencyOf(target: Target): Promise<LatencyReport | null> {
  if (!target.adminUrl) return null;
  return (await (await fetch(`${target.adminUrl}/latency`)).json()) as LatencyReport;
}

async function main(): Promise<void> {
  const setups = new Setups(work, track);
  const redisPort = await freePort();
  const redis = await track(
    start(
      'redis-server',
      redisServer!,
      ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      () => listening(redisPort),
    ),
  );
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const meter = new RedisMeter(redisUrl, redis.child.pid!);

  // Two more ports of the same upstream: the pool's row spreads its requests over three targets. One
  // nginx serves them all, so that the row measures the gateway's work and not the loopback's wake-ups
  // of three processes, each asleep more often than one (docs/performance.md, issue 44).
  const morePorts = [await freePort(), await freePort()];
  const upstreamServer = nginx
    ? await setups.nginx(
        nginx,
        'upstream',
        `${morePorts.map((port) => `    listen 127.0.0.1:${port};\n`).join('')}` +
          `    location / { default_type application/json; return 200 '{"ok":true}'; }`,
      )
    : await setups
        .node('node upstream', 'node-upstream.js', [], false)
        .then((target) => ({ port: Number(new URL(target.url).port), pid: target.pid }));
  const upstream = `http://127.0.0.1:${upstreamServer.port}`;
  const memory = { type: 'memory' };
  const shared = { type: 'redis', url: redisUrl, prefix: 'bench:' };

  const all = new Map<string, Target>();
  const add = (target: Target) => all.set(target.name, target);
  add(await setups.node(names.floor, 'undici-floor.js', [upstream], false));
  add(await setups.node(names.control, 'undici-floor.js', [upstream], false));
  add(await setups.node(names.bare, 'bare-proxy.js', [upstream], false));
  add(await setups.quotagate(names.routing, 'a', upstream, memory, { auth: 'none', quota: false }));
  add(await setups.quotagate(names.basic, 'b', upstream, memory, { quota: false }));
  identityProvider = await startIdentityProvider();
  const jwt = { jwt: identityProvider.settings };
  add({
    ...(await setups.quotagate(names.jwt, 'jwt', upstream, memory, { auth: jwt, quota: false })),
    headers: { authorization: identityProvider.authorization },
  });
  add(await setups.quotagate(names.quotas, 'c', upstream, memory, { quota: true }));
  add(await setups.quotagate(names.shipped, 'd', upstream, memory, { quota: true, accessLog: true }));
  add(await setups.quotagate(names.redis, 'redis', upstream, shared, { quota: true, accessLog: true }));
  add(
    await setups.quotagate(names.workers, 'workers', upstream, memory, {
      quota: true,
      accessLog: true,
      workers: 2,
    }),
  );
  const shippedLayers = { quota: true, accessLog: true } as const;
  // Without nginx, two more Node upstreams stand for the pool's other targets.
  const moreOrigins = nginx
    ? morePorts.map((port) => `http://127.0.0.1:${port}`)
    : await Promise.all(
        ['upstream-2', 'upstream-3'].map(async (name) => {
          const target = await setups.node(name, 'node-upstream.js', [], false);
          return new URL(target.url).origin;
        }),
      );
  add(
    await setups.quotagate(names.pool, 'pool', upstream, memory, {
      ...shippedLayers,
      moreTargets: moreOrigins,
    }),
  );
  // The webhook is never called (the quotas never reach 80%): the row measures the check on each request.
  add(
    await setups.quotagate(names.alerts, 'alerts', upstream, memory, {
      ...shippedLayers,
      notifications: { webhooks: [{ url: `${upstream}/hooks`, secret: 'bench-webhook-secret-0123456789' }] },
    }),
  );
  // Tracing exports to a sink that takes every span at once; wrk sends no traceparent, so the ratio
  // (parentbased_traceidratio, of each new trace) alone decides which exchanges are sampled.
  const sink = new URL((await setups.node('otlp sink', 'otlp-sink.js', [], false)).url).origin;
  for (const [name, dir, sampleRatio] of [
    [names.traced, 'traced', 1],
    [names.sampled, 'sampled', 0.01],
  ] as const)
    add(
      await setups.quotagate(name, dir, upstream, memory, {
        ...shippedLayers,
        tracing: { enabled: true, endpoint: `${sink}/v1/traces`, sampleRatio },
      }),
    );
  if (values.baseline) {
    const cli = path.resolve(values.baseline, 'dist/cli.js');
    add(await setups.quotagate(names.baseline, 'baseline', upstream, memory, { ...shippedLayers, cli }));
  }
  if (!values['skip-protocols']) {
    if (h2loadBinary) {
      add(await setups.node(names.bareH2, 'bare-http2-proxy.js', [upstream], false, 'h2'));
      add(await setups.quotagate(names.h2, 'h2', upstream, memory, { ...shippedLayers, protocol: 'h2' }));
    }
    const echo = await setups.node('ws upstream', 'ws-upstream.js', [], false);
    const echoOrigin = new URL(echo.url).origin;
    add(await setups.node(names.bareWs, 'bare-ws-relay.js', [echoOrigin], false, 'ws'));
    add(await setups.node(names.wsRelay, 'ws-message-relay.js', [echoOrigin], false, 'ws'));
    add(
      await setups.quotagate(names.ws, 'ws', echoOrigin, memory, {
        ...shippedLayers,
        protocol: 'ws',
      }),
    );
    for (const row of await startStreamedRows(setups, streamEvents)) add(row);
  }
  add(await setups.node(names.peer, 'peer-gateway.js', [upstream, 'memory', benchKey], false));
  add(await setups.node(names.peerRedis, 'peer-gateway.js', [upstream, redisUrl, benchKey], true));
  if (nginx) add(await setups.nginxGateway(nginx, names.nginx, upstreamServer.port));
  if (haproxy) add(await setups.haproxyGateway(haproxy, names.haproxy, upstreamServer.port));
  if (nginx) {
    add({ name: names.direct, url: `${upstream}/pets/1`, pid: upstreamServer.pid, redis: false });
    const proxy = await setups.nginx(
      nginx,
      'proxy',
      `    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }`,
      `  upstream backend { server 127.0.0.1:${upstreamServer.port}; keepalive 64; }\n`,
    );
    add({
      name: names.nginxProxy,
      url: `http://127.0.0.1:${proxy.port}/pets/1`,
      pid: proxy.pid,
      redis: false,
    });
  }
  const target = (name: string) => all.get(name)!;
  const present = (list: readonly string[]) => list.filter((name) => all.has(name));

  // CPU time spent on the machine outside the bench's own process tree while the measures run: another
  // tenant's load makes every figure noisier.
  const outsideBench = () => {
    const [machineSeconds, benchSeconds] = [machineCpuSeconds(), cpuSeconds(process.pid)];
    return machineSeconds === null || benchSeconds === null ? NaN : machineSeconds - benchSeconds;
  };
  const timedFrom = { cpu: outsideBench(), wall: performance.now() };

  // 1. The headline: every setup loaded at the same time, each by its own wrk.
  const sideNames = present([
    names.floor,
    names.control,
    names.bare,
    names.routing,
    names.basic,
    names.jwt,
    names.quotas,
    names.shipped,
    names.baseline,
    names.pool,
    names.alerts,
    names.traced,
    names.sampled,
    names.redis,
    names.workers,
    names.peer,
    names.nginx,
    names.haproxy,
    names.bareH2,
    names.h2,
    names.bareWs,
    names.wsRelay,
    names.ws,
    ...Object.values(streamedNames),
  ]);
  const sideRuns: SideBySideRuns = await runSideBySide(
    sideNames.map((name) => target(name)),
    {
      wrk,
      rounds: Number(values['side-rounds']),
      seconds: Number(values['side-seconds']),
      warmupSeconds: Number(values['side-warmup-seconds']),
      connections: Number(values['side-connections']),
      headers,
      pinning,
      say,
    },
  );
  if (all.has(streamedNames.body))
    await checkStreamedCharges(Object.values(streamedNames).map(target), streamEvents);
  const control = ratioOf(sideRuns, names.control, names.floor);
  const noise = noiseOf(control);
  const headline: HeadlineRow[] = sideNames.map((name) => {
    const reference = referenceOf[name] ?? names.floor;
    return headlineRowOf(sideRuns, name, {
      reference,
      shownAs: shortNames[reference] ?? reference,
      ...(layerBelow[name] ? { below: layerBelow[name] } : {}),
      vsBare: perRequest(target(name)) ? ratioOf(sideRuns, name, names.bare).median : null,
      ...(targets[name] ? { target: targets[name] } : {}),
    });
  });
  const againstPeer = ratioOf(sideRuns, names.shipped, names.peer);
  const againstBaseline = values.baseline ? ratioOf(sideRuns, names.shipped, names.baseline) : null;
  const redisAgainstPeer = ratioOf(sideRuns, names.redis, names.peer);
  const jwtAgainstBasic = ratioOf(sideRuns, names.jwt, names.basic);
  const tracing = {
    traced: ratioOf(sideRuns, names.traced, names.shipped),
    sampled: ratioOf(sideRuns, names.sampled, names.shipped),
    // What the sink took from both rows, over the warm-up and the rounds.
    exported: (await (await fetch(`${sink}/stats`)).json()) as SinkStats,
  };
  const streamed = all.has(streamedNames.body) ? streamedCost(sideRuns) : null;

  // 2. Throughput at `connections` connections, closed loop, one setup at a time over the whole machine,
  // in interleaved rounds; CPU per request of each process tree, and what Redis spends per request.
  const throughputNames = present([
    names.direct,
    names.nginxProxy,
    names.bare,
    names.shipped,
    names.redis,
    names.workers,
    names.peer,
    names.peerRedis,
    names.nginx,
    names.haproxy,
  ]);
  const results = new Map<string, Array<LoadResult & { cpuUs: number; redis: RedisCost | null }>>(
    throughputNames.map((name) => [name, []]),
  );
  const load = (url: string, duration: number, count = connections) =>
    runLoad(wrk, { url, connections: count, seconds: duration, headers });
  if (!values['skip-throughput']) {
    // The JIT of a Node proxy settles only after several seconds of load.
    for (const name of throughputNames) {
      say(`throughput: warming up ${name} (${values['warmup-seconds']} s)`);
      await load(target(name).url, Number(values['warmup-seconds']));
    }
    for (let round = 1; round <= rounds; round += 1) {
      for (const name of throughputNames) {
        const one = target(name);
        say(`throughput round ${round}/${rounds}: ${name} (${seconds} s)`);
        const redisBefore = one.redis ? await meter.read() : null;
        const cpuBefore = cpuSeconds(one.pid);
        const result = await load(one.url, seconds);
        const cpuAfter = cpuSeconds(one.pid);
        const redisAfter = redisBefore ? await meter.read() : null;
        if (result.non2xx > 0) throw new Error(`${name}: ${result.non2xx} responses were not 2xx`);
        results.get(name)!.push({
          ...result,
          cpuUs: cpuPerRequest(cpuBefore, cpuAfter, result.requests),
          redis: redisBefore && redisAfter ? costPerRequest(redisBefore, redisAfter, result.requests) : null,
        });
      }
    }
  }
  const trees = Object.fromEntries(
    throughputNames.map((name) => [name, treeCpuTime(target(name).pid)?.pids.length ?? null]),
  );
  // A setup against bare http-proxy-3 in the same round (its neighbour in time), then the median.
  const againstBare = <T>(runs: Map<string, T[]>, name: string, compare: (run: T, bare: T) => number) => {
    const bareRuns = runs.get(names.bare)!;
    return median(runs.get(name)!.map((run, i) => compare(run, bareRuns[i]!)));
  };
  const rows: Row[] = values['skip-throughput']
    ? []
    : throughputNames.map((name) => {
        const runs = results.get(name)!;
        const redisRuns = runs.flatMap((r) => (r.redis ? [r.redis] : []));
        return {
          name,
          rps: median(runs.map((r) => r.rps)),
          p50Ms: median(runs.map((r) => r.p50Ms)),
          p99Ms: median(runs.map((r) => r.p99Ms)),
          processes: trees[name] ?? null,
          cpuUs: median(runs.map((r) => r.cpuUs)),
          cpuVsBare: againstBare(results, name, (run, bare) => run.cpuUs / bare.cpuUs),
          redisCalls: target(name).redis ? median(redisRuns.map((r) => r.scriptCalls)) : null,
          redisCpuUs: target(name).redis ? median(redisRuns.map((r) => r.cpuUs)) : null,
        };
      });
  const rpsAgainstBare = (name: string) =>
    values['skip-throughput'] ? NaN : againstBare(results, name, (run, bare) => run.rps / bare.rps);

  // 3. Latency at a fixed rate, open loop: the generator runs in its own process and sends on schedule;
  // for quotagate, the latency it measures itself over the same run (its /latency before and after).
  const latencyNames = [names.bare, names.shipped, names.redis, names.peer];
  const latencyRuns = new Map<
    string,
    Array<OpenLoopResult & { cpuUs: number; gateway: LatencyReport | null }>
  >(latencyNames.map((name) => [name, []]));
  const latencyRounds = Math.max(3, Number(values['latency-rounds']));
  if (!values['skip-latency']) {
    // An unrecorded run first: the first seconds at a new pace of a process idle for minutes are slower
    // (connections opened again, code not yet compiled for it), and no round should pay for them.
    for (const name of latencyNames) {
      say(`latency: settling ${name} (${latencyRate} req/s, 3 s, unrecorded)`);
      await runFixedRate({ url: target(name).url, rate: latencyRate, seconds: 3, warmupSeconds: 0, headers });
    }
    for (let round = 1; round <= latencyRounds; round += 1) {
      for (const name of latencyNames) {
        const one = target(name);
        say(
          `latency round ${round}/${latencyRounds}: ${name} (${latencyRate} req/s, open loop, ${latencySeconds} s)`,
        );
        const cpuBefore = cpuSeconds(one.pid);
        const gatewayBefore = await latencyOf(one);
        const result = await runFixedRate({
          url: one.url,
          rate: latencyRate,
          seconds: latencySeconds,
          warmupSeconds: latencyWarmupSeconds,
          headers,
        });
        const cpuAfter = cpuSeconds(one.pid);
        const gatewayAfter = await latencyOf(one);
        if (result.non2xx > 0) throw new Error(`${name}: ${result.non2xx} responses were not 2xx`);
        latencyRuns.get(name)!.push({
          ...result,
          cpuUs: cpuPerRequest(cpuBefore, cpuAfter, result.answeredTotal),
          gateway: gatewayBefore && gatewayAfter ? latencyBetween(gatewayBefore, gatewayAfter) : null,
        });
      }
    }
  }
  const latencyRows: LatencyRow[] = values['skip-latency']
    ? []
    : latencyNames.map((name) => {
        const runs = latencyRuns.get(name)!;
        const sum = (count: (run: OpenLoopResult) => number) =>
          runs.reduce((total, run) => total + count(run), 0);
        return {
          name,
          p50Ms: median(runs.map((r) => r.latencyMs.p50)),
          p99Ms: median(runs.map((r) => r.latencyMs.p99)),
          p999Ms: median(runs.map((r) => r.latencyMs.p999)),
          addedP99Ms: againstBare(latencyRuns, name, (run, bare) => run.latencyMs.p99 - bare.latencyMs.p99),
          cpuUs: median(runs.map((r) => r.cpuUs)),
          cpuVsBare: againstBare(latencyRuns, name, (run, bare) => run.cpuUs / bare.cpuUs),
          sendLagP99Ms: median(runs.map((r) => r.sendLagMs.p99)),
          late: sum((run) => run.late),
          failed: sum((run) => run.errors + run.unanswered),
        };
      });
  const gatewayRows: GatewayLatencyRow[] = latencyNames.flatMap((name) => {
    const reports = (latencyRuns.get(name) ?? []).flatMap((run) => (run.gateway ? [run.gateway] : []));
    if (reports.length === 0) return [];
    const of = (pick: (report: LatencyReport) => number) => median(reports.map(pick));
    return [
      {
        name,
        requestP50Ms: of((r) => r.request.p50Ms),
        requestP99Ms: of((r) => r.request.p99Ms),
        requestP999Ms: of((r) => r.request.p999Ms),
        responseP50Ms: of((r) => r.response.p50Ms),
        responseP99Ms: of((r) => r.response.p99Ms),
        responseP999Ms: of((r) => r.response.p999Ms),
        count: reports.reduce((total, r) => total + r.request.count, 0),
      },
    ];
  });

  // 4. Every core or one: the same gateway as shipped with workers: 1 and with one worker per core,
  // each over the whole machine in turn (the load generator and the upstream share it), same load.
  const cores = os.availableParallelism();
  const workersRuns = new Map<string, Array<LoadResult & { cpuUs: number; cores: number }>>();
  if (!values['skip-workers'] && cores > 1) {
    const auto = await setups.quotagate(
      `workers: 'auto' (${cores} workers)`,
      'workers-auto',
      upstream,
      memory,
      {
        quota: true,
        accessLog: true,
        workers: 'auto',
      },
    );
    const single = target(names.shipped);
    const pair = [{ ...single, name: 'workers: 1 (one process)' }, auto];
    for (const one of pair) {
      workersRuns.set(one.name, []);
      await load(one.url, Number(values['warmup-seconds']));
    }
    for (let round = 1; round <= rounds; round += 1) {
      for (const one of pair) {
        say(`workers round ${round}/${rounds}: ${one.name} (${seconds} s)`);
        const cpuBefore = cpuSeconds(one.pid);
        const wallBefore = performance.now();
        const result = await load(one.url, seconds);
        const cpuAfter = cpuSeconds(one.pid);
        const wall = (performance.now() - wallBefore) / 1000;
        workersRuns.get(one.name)!.push({
          ...result,
          cpuUs: cpuPerRequest(cpuBefore, cpuAfter, result.requests),
          cores: cpuBefore === null || cpuAfter === null ? NaN : (cpuAfter - cpuBefore) / wall,
        });
      }
    }
  }
  const workersRows: WorkersRow[] = [...workersRuns].map(([name, runs]) => ({
    name,
    rps: median(runs.map((r) => r.rps)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
    cpuUs: median(runs.map((r) => r.cpuUs)),
    cores: median(runs.map((r) => r.cores)),
  }));
  const outsideCores = (outsideBench() - timedFrom.cpu) / ((performance.now() - timedFrom.wall) / 1000);

  // 5. Steady memory, then the cases on the Redis store that count every script call.
  const soakSeconds = Number(values['soak-seconds']);
  say(`steady memory: quotagate (Redis store) under full load for ${soakSeconds} s`);
  const sharedGateway = target(names.redis);
  const rss = () =>
    Number(execFileSync('ps', ['-o', 'rss=', '-p', String(sharedGateway.pid)], { encoding: 'utf8' }).trim()) *
    1024;
  await load(sharedGateway.url, 5);
  const rssWarm = rss();
  await load(sharedGateway.url, soakSeconds);
  const rssAfter = rss();
  // The cases below count every script call Redis runs: every server started after Redis and the
  // upstream (the first two) stops, so that none adds its own.
  for (const child of running.splice(2).reverse()) await child.stop();

  const refusals: RefusalCost[] = [];
  for (const gatewayCount of [1, 3]) {
    refusals.push(
      await runRefusalCost(
        path.join(work, `refusals-${gatewayCount}`),
        upstream,
        redisUrl,
        meter,
        gatewayCount,
        say,
      ),
    );
  }
  await meter.close();

  const accuracy: AccuracyResult[] = [];
  if (!values['skip-accuracy']) {
    accuracy.push(await runAccuracyBench(path.join(work, 'accuracy'), redisUrl, say));
    accuracy.push(
      await runAccuracyBench(path.join(work, 'accuracy-frozen'), redisUrl, say, {
        pid: redis.child.pid!,
        fromSeconds: 10,
        forSeconds: 12,
      }),
    );
  }

  // The figures issue 21 asks for, from this run.
  const shippedLatency = latencyRows.find((row) => row.name === names.shipped);
  const shippedGateway = gatewayRows.find((row) => row.name === names.shipped);
  const headlineOf = (name: string) => headline.find((row) => row.name === name);
  const ratioFigure = (what: string, name: string, limit: number, against: 'floor' | 'bare'): Figure => {
    const row = headlineOf(name);
    const measured = (against === 'floor' ? row?.ratio : row?.vsBare) ?? NaN;
    return {
      what,
      measured: Number.isFinite(measured) ? `${measured.toFixed(2)}×` : 'n/a',
      target: `≤ ${limit.toFixed(2)}×`,
      met: Number.isFinite(measured) ? measured <= limit : null,
    };
  };
  const measuredIf = (measured: boolean, met: boolean) => (measured ? met : null);
  const figures: Figure[] = [
    ...(againstBaseline
      ? [
          {
            what: `as shipped (memory) against the baseline build, CPU per request (rounds ${againstBaseline.lowest.toFixed(2)}–${againstBaseline.highest.toFixed(2)})`,
            measured: `${againstBaseline.median.toFixed(2)}×`,
            target: '≤ 1.03×',
            met: againstBaseline.median <= 1.03,
          },
        ]
      : []),
    ratioFigure('as shipped, memory store, CPU vs the undici floor (issue 35)', names.shipped, 1.25, 'floor'),
    ratioFigure('as shipped, Redis store, CPU vs the undici floor (issue 35)', names.redis, 1.3, 'floor'),
    ratioFigure('routing + proxy only, CPU vs bare http-proxy-3 (issue 21)', names.routing, 1.03, 'bare'),
    ratioFigure('basic + 2 quotas, memory, no access log, vs bare (issue 21)', names.quotas, 1.1, 'bare'),
    ratioFigure('as shipped, memory store, vs bare (issue 21)', names.shipped, 1.15, 'bare'),
    ratioFigure('as shipped, Redis store, vs bare (issue 21)', names.redis, 1.2, 'bare'),
    {
      what: 'as shipped (memory) against the Node peer (memory), CPU per request',
      measured: `${againstPeer.median.toFixed(2)}×`,
      target: '≤ 0.85×',
      met: againstPeer.median <= 0.85,
    },
    {
      what: 'added p99 at a fixed 2,000 req/s, open loop (memory store)',
      measured: shippedLatency ? `${shippedLatency.addedP99Ms.toFixed(2)} ms` : 'n/a',
      target: '≤ 1 ms',
      met: measuredIf(shippedLatency !== undefined, (shippedLatency?.addedP99Ms ?? Infinity) <= 1),
    },
    {
      what: 'added p99 the gateway measures itself (request + response part)',
      measured: shippedGateway
        ? `${(shippedGateway.requestP99Ms + shippedGateway.responseP99Ms).toFixed(3)} ms`
        : 'n/a',
      target: '≤ 0.3 ms',
      met: measuredIf(
        shippedGateway !== undefined,
        (shippedGateway?.requestP99Ms ?? Infinity) + (shippedGateway?.responseP99Ms ?? Infinity) <= 0.3,
      ),
    },
    {
      what: `req/s at ${connections} connections against bare http-proxy-3 (as shipped, memory)`,
      measured: Number.isFinite(rpsAgainstBare(names.shipped))
        ? `${rpsAgainstBare(names.shipped).toFixed(2)}×`
        : 'n/a',
      target: '≥ 0.90×',
      met: measuredIf(!values['skip-throughput'], rpsAgainstBare(names.shipped) >= 0.9),
    },
  ];

  const machine = {
    cores,
    cpu: os.cpus()[0]?.model ?? 'unknown',
    node: process.version,
    redis: versionOf(redisServer!, ['--version']),
    nginx: nginx ? versionOf(nginx, ['-v']) : null,
    haproxy: haproxy ? versionOf(haproxy, ['-v']) : null,
    load: wrk ? versionOf(wrk, ['-v']) : 'autocannon',
    pinning,
    outsideCores,
  };
  const sideRounds = Number(values['side-rounds']);
  const markdown = [
    `Machine: ${machine.cores} cores (${machine.cpu}), Node ${machine.node}, ${machine.redis}${machine.nginx ? `, ${machine.nginx}` : ''}${machine.haproxy ? `, ${machine.haproxy}` : ''}, load by ${machine.load}. Other processes on the machine used ${Number.isFinite(outsideCores) ? outsideCores.toFixed(2) : 'n/a'} cores on average while the bench measured.`,
    '',
    headlineTable(headline, noise),
    '',
    `Side by side: every setup loaded at the same time, each by its own wrk (one thread, ${values['side-connections']} connections; each round starts them from another setup), ${sideRounds} rounds of ${values['side-seconds']} s after ${values['side-warmup-seconds']} s of warm-up${pinning ? `; the servers share core ${pinning.servers}, the wrks and the upstream the other core(s)` : ''}. CPU µs/req: user + system time of each setup's whole process tree (from /proc) over the round, divided by the requests its wrk completed. "CPU vs reference": the setup's over its reference's in the same round, median of the rounds; the reference is the undici floor, but for quotagate over HTTP/2, WebSocket and the streamed rows (the bare proxy of their protocol). Noise: the control, an unmodified second copy of the floor, came to ${control.median.toFixed(2)}× the floor (95% confidence interval of that median ${control.medianLow.toFixed(2)}–${control.medianHigh.toFixed(2)}, rounds ${control.lowest.toFixed(2)}–${control.highest.toFixed(2)}), so ratios within ±${(noise * 100).toFixed(0)}% of each other do not differ in this run. jwt against basic auth, in the same rounds: ${jwtAgainstBasic.median.toFixed(2)}× (${jwtAgainstBasic.lowest.toFixed(2)}–${jwtAgainstBasic.highest.toFixed(2)}). As shipped against the Node peer (memory), in the same rounds: ${againstPeer.median.toFixed(2)}× (${againstPeer.lowest.toFixed(2)}–${againstPeer.highest.toFixed(2)}); on the Redis store: ${redisAgainstPeer.median.toFixed(2)}×. ${tracingText(tracing)}`,
    ...(streamed ? ['', streamedText(streamed, streamEvents, Number(values['side-connections']))] : []),
    '',
    figuresTable(figures),
    '',
    ...(rows.length
      ? [
          markdownTable(rows, names.bare, nginx ? names.nginxProxy : null),
          '',
          `Throughput: one setup at a time over the whole machine (wrk, one thread, ${connections} connections), ${values['warmup-seconds']} s of warm-up each, then ${rounds} interleaved rounds of ${seconds} s, medians; CPU µs/req as above; ratios against bare http-proxy-3 in the same round. Redis script calls and CPU per request: the bench's own redis-server over the same round.`,
          '',
        ]
      : []),
    ...(latencyRows.length
      ? [
          latencyTable(latencyRows, latencyRate),
          '',
          gatewayLatencyTable(gatewayRows, latencyRate),
          '',
          `Open loop (\`bench/open-loop.ts\`, its own process): ${latencyRate} requests a second on a fixed schedule whether or not earlier ones were answered, each setup first settled by 3 s unrecorded, then ${latencyWarmupSeconds} s unrecorded and ${latencySeconds} s recorded per run, ${latencyRounds} interleaved rounds, medians; latency from each request's scheduled send time (no coordinated omission). The second table is what quotagate measured itself over the same runs (its /latency read before and after each run, the difference of its HdrHistograms): "request" from a request's arrival until the upstream request is handed to Node's HTTP client, "response" from the upstream response's head until the client response's head is handed to Node.`,
          '',
        ]
      : []),
    ...(workersRows.length
      ? [
          workersTable(workersRows, connections),
          '',
          `Workers: the same gateway (as shipped, memory store) with one process and with one worker per core, over the whole machine in turn (the load generator and the upstream share it), ${rounds} interleaved rounds of ${seconds} s; "cores busy": the process tree's CPU seconds over wall seconds.`,
          '',
        ]
      : []),
    `- RSS of quotagate (Redis store): ${(rssWarm / 2 ** 20).toFixed(1)} MiB after warm-up, ${(rssAfter / 2 ** 20).toFixed(1)} MiB after ${soakSeconds} s at full load (${(((rssAfter - rssWarm) / rssWarm) * 100).toFixed(1)}%).`,
    '',
    refusalTable(refusals),
    '',
    ...(accuracy.length ? [accuracyTable(accuracy), ''] : []),
  ].join('\n');
  const resultsDir = path.resolve('bench/results');
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(
    path.join(resultsDir, 'latest.json'),
    `${JSON.stringify(
      {
        machine,
        headline,
        control,
        noise,
        streamed,
        tracing,
        sideRuns,
        figures,
        rows,
        trees,
        latency: latencyRows,
        gatewayLatency: gatewayRows,
        workers: workersRows,
        rssWarm,
        rssAfter,
        refusals,
        accuracy,
        runs: Object.fromEntries(results),
        latencyRuns: Object.fromEntries(latencyRuns),
        workersRuns: Object.fromEntries(workersRuns),
      },
      null,
      2,
    )}\n`,
  );
  writeFileSync(path.join(resultsDir, 'latest.md'), markdown);
  writeFileSync(
    path.join(resultsDir, 'chart.svg'),
    headlineChart(
      headline.filter((row) => row.reference === shortNames[names.floor]),
      'the undici floor',
      `CPU per request against the undici floor, side by side (${sideRounds} rounds)`,
    ),
  );
  process.stdout.write(`\n${markdown}\n`);
  say('written: bench/results/latest.json, latest.md, chart.svg');
}

/** What bench/servers/otlp-sink.ts took: its `/stats`. */
interface SinkStats {
  exports: number;
  bytes: number;
  spans: number;
}

/** The tracing rows against the same build with tracing off, and what the sink took from both. */
function tracingText({ traced, sampled, exported }: { traced: Ratio; sampled: Ratio; exported: SinkStats }) {
  const of = (ratio: Ratio) =>
    `${ratio.median.toFixed(2)}× (${ratio.lowest.toFixed(2)}–${ratio.highest.toFixed(2)})`;
  return (
    `Tracing on against as shipped (tracing off), CPU per request, in the same rounds: at ratio 1 ${of(traced)}, ` +
    `at ratio 0.01 ${of(sampled)}; the OTLP sink took ${exported.spans.toLocaleString('en-US')} spans ` +
    `in ${exported.exports.toLocaleString('en-US')} exports (${(exported.bytes / 2 ** 20).toFixed(1)} MiB) from both rows, warm-up included.`
  );
}

async function stopAll(): Promise<void> {
  for (const child of running.splice(0).reverse()) await child.stop();
  await identityProvider?.close();
  identityProvider = null;
  rmSync(work, { recursive: true, force: true });
}

await runThenStop(main, stopAll, say);
