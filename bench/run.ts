import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runAccuracyBench, type AccuracyResult } from './accuracy.js';
import { cpuSeconds, machineCpuSeconds, treeCpuTime } from './cpu-time.js';
import { runFixedRate, type OpenLoopResult } from './fixed-rate.js';
import { runLoad, type LoadResult } from './load.js';
import { freePort, listening, start, type Running } from './processes.js';
import {
  benchAuthorization,
  benchKey,
  neverRejecting,
  setSystemRestrictions,
  startQuotagate,
  type GatewayLayers,
} from './quotagate.js';
import { costPerRequest, RedisMeter, type RedisCost } from './redis-usage.js';
import { runRefusalCost, type RefusalCost } from './refusal-cost.js';
import {
  ablationTable,
  accuracyTable,
  latencyTable,
  markdownTable,
  median,
  refusalTable,
  sideBySideTable,
  svgChart,
  type AblationRow,
  type LatencyRow,
  type Row,
  type SideBySideRow,
} from './report.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '5' },
    'warmup-seconds': { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    'soak-seconds': { type: 'string', default: '60' },
    'skip-accuracy': { type: 'boolean', default: false },
    'latency-rate': { type: 'string', default: '2000' },
    'latency-seconds': { type: 'string', default: '6' },
    'skip-latency': { type: 'boolean', default: false },
    'skip-ablation': { type: 'boolean', default: false },
    'side-rounds': { type: 'string', default: '10' },
    'side-seconds': { type: 'string', default: '3' },
    'side-connections': { type: 'string', default: '20' },
    'skip-side': { type: 'boolean', default: false },
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
  // wrk -v exits 1 and nginx -v prints to stderr: take the first line of whatever they print.
  const { stdout, stderr } = spawnSync(command, args, { encoding: 'utf8' });
  return `${stdout}${stderr}`.split('\n')[0]!.trim();
};

const wrk = which('wrk');
const nginx = which('nginx');
const redisServer = which('redis-server');
if (!redisServer) throw new Error('bench: redis-server is needed (apt-get install -y redis-server)');
say(wrk ? `load: wrk (${versionOf(wrk, ['-v'])})` : 'load: wrk not found, using autocannon');
say(
  nginx
    ? `nginx: ${versionOf(nginx, ['-v'])}`
    : 'nginx: not found, skipping the nginx reference and using a Node upstream',
);

const bareName = 'bare http-proxy-3, keep-alive';
const memoryName = 'quotagate, memory store';
const redisName = 'quotagate, Redis store';
const peerName = 'fast-gateway + rate-limiter-flexible (Redis)';

/** CPU µs per request from two readings of CPU seconds; NaN where /proc could not tell. */
const cpuPerRequest = (before: number | null, after: number | null, requests: number) =>
  before === null || after === null ? NaN : ((after - before) * 1e6) / Math.max(1, requests);

const work = mkdtempSync(path.join(tmpdir(), 'quotagate-bench-'));
const running: Running[] = [];
const startTracked = async <T extends Running>(what: Promise<T>): Promise<T> => {
  const started = await what;
  running.push(started);
  return started;
};

/** Starts an nginx serving `server`; its port, and the pid of its master. */
async function startNginx(name: string, server: string): Promise<{ port: number; pid: number }> {
  const port = await freePort();
  const dir = path.join(work, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'nginx.conf'),
    `worker_processes 1;\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log warn;\nevents { worker_connections 1024; }\n` +
      `http {\n  access_log off;\n  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;\n` +
      `  fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;\n` +
      `  keepalive_requests 1000000;\n  server {\n    listen 127.0.0.1:${port};\n${server}\n  }\n}\n`,
  );
  const started = await startTracked(
    start(name, nginx!, ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], () =>
      listening(port),
    ),
  );
  return { port, pid: started.child.pid! };
}

async function main(): Promise<void> {
  const redisPort = await freePort();
  const redis = await startTracked(
    start(
      'redis-server',
      redisServer!,
      ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      () => listening(redisPort),
    ),
  );
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const redisPid = redis.child.pid!;
  const meter = new RedisMeter(redisUrl, redisPid);

  const upstreamServer = nginx
    ? await startNginx(
        'upstream',
        `    location / { default_type application/json; return 200 '{"ok":true}'; }`,
      )
    : await (async () => {
        const port = await freePort();
        const started = await startTracked(
          start(
            'node upstream',
            process.execPath,
            ['dist/bench/servers/node-upstream.js', String(port)],
            () => listening(port),
          ),
        );
        return { port, pid: started.child.pid! };
      })();
  const upstreamPort = upstreamServer.port;
  const upstream = `http://127.0.0.1:${upstreamPort}`;

  // `pid`: the root of the process tree whose CPU time a request of this setup costs (the upstream's for
  // the direct one); `redis`: whether its requests use the bench's redis-server, whose calls and CPU time
  // are then read too; `main`: a row of the main table (else of the ablation table only).
  const targets: Array<{ name: string; url: string; pid: number; redis: boolean; main: boolean }> = [
    {
      name: `direct to the upstream (${nginx ? 'nginx return 200' : 'Node'})`,
      url: `${upstream}/pets/1`,
      pid: upstreamServer.pid,
      redis: false,
      main: true,
    },
  ];
  if (nginx) {
    const { port, pid } = await startNginx(
      'proxy',
      `    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }\n  }\n  upstream backend { server 127.0.0.1:${upstreamPort}; keepalive 64;`,
    );
    targets.push({
      name: 'nginx proxy_pass, keep-alive',
      url: `http://127.0.0.1:${port}/pets/1`,
      pid,
      redis: false,
      main: true,
    });
  }
  const barePort = await freePort();
  const bare = await startTracked(
    start(
      'bare proxy',
      process.execPath,
      ['dist/bench/servers/bare-proxy.js', String(barePort), upstream],
      () => listening(barePort),
    ),
  );
  targets.push({
    name: bareName,
    url: `http://127.0.0.1:${barePort}/pets/1`,
    pid: bare.child.pid!,
    redis: false,
    main: true,
  });

  const memory = await startTracked(startQuotagate(path.join(work, 'memory'), upstream, { type: 'memory' }));
  await setSystemRestrictions(memory, neverRejecting);
  targets.push({
    name: memoryName,
    url: `${memory.url}/pets/1`,
    pid: memory.pid,
    redis: false,
    main: true,
  });

  // Every core: the same gateway with two data-plane workers behind its port (node:cluster).
  const twoWorkers = await startTracked(
    startQuotagate(path.join(work, 'workers'), upstream, { type: 'memory' }, { workers: 2 }),
  );
  await setSystemRestrictions(twoWorkers, neverRejecting);
  targets.push({
    name: 'quotagate, memory store, workers: 2',
    url: `${twoWorkers.url}/pets/1`,
    pid: twoWorkers.pid,
    redis: false,
    main: true,
  });

  const shared = await startTracked(
    startQuotagate(path.join(work, 'redis'), upstream, { type: 'redis', url: redisUrl, prefix: 'bench:' }),
  );
  await setSystemRestrictions(shared, neverRejecting);
  targets.push({
    name: redisName,
    url: `${shared.url}/pets/1`,
    pid: shared.pid,
    redis: true,
    main: true,
  });

  const peerPort = await freePort();
  const peer = await startTracked(
    start(
      'peer gateway',
      process.execPath,
      ['dist/bench/servers/peer-gateway.js', String(peerPort), upstream, redisUrl, benchKey],
      () => listening(peerPort),
    ),
  );
  targets.push({
    name: peerName,
    url: `http://127.0.0.1:${peerPort}/pets/1`,
    pid: peer.child.pid!,
    redis: true,
    main: true,
  });

  // The ablation: quotagate on the memory store, one layer more a row; the row with the quota is the main
  // table's memory store (basic auth and the two never-rejecting restrictions, access logs off).
  const ablation: Array<{ layers: string; target: string }> = [];
  if (!values['skip-ablation']) {
    const layer = async (dir: string, name: string, layers: GatewayLayers, restrictions: unknown[]) => {
      const gateway = await startTracked(
        startQuotagate(path.join(work, dir), upstream, { type: 'memory' }, layers),
      );
      if (restrictions.length > 0) await setSystemRestrictions(gateway, restrictions);
      targets.push({ name, url: `${gateway.url}/pets/1`, pid: gateway.pid, redis: false, main: false });
      return name;
    };
    const routingOnly = await layer(
      'ablation-a',
      'quotagate, memory store: routing + proxy only',
      { auth: 'none' },
      [],
    );
    const withAuth = await layer('ablation-b', 'quotagate, memory store: + basic auth', {}, []);
    const withLog = await layer(
      'ablation-d',
      'quotagate, memory store: + quota + access log',
      { accessLog: true },
      neverRejecting,
    );
    ablation.push(
      { layers: 'bare http-proxy-3 (reference)', target: bareName },
      { layers: "(a) routing + proxy only (APIKeyAuthType 'none', no restrictions)", target: routingOnly },
      { layers: '(b) + basic auth', target: withAuth },
      { layers: '(c) + quota: 2 never-rejecting restrictions (= main table)', target: memoryName },
      { layers: '(d) + access log (LOG_LEVEL info, a JSON line per request to /dev/null)', target: withLog },
    );
  }

  const headers = { authorization: benchAuthorization };
  const load = (url: string, duration = seconds) =>
    runLoad(wrk, { url, connections, seconds: duration, headers });

  // The JIT of a Node proxy settles only after several seconds of load; unwarmed, the first round of the
  // setups with the most JavaScript would understate them.
  const warmupSeconds = Number(values['warmup-seconds']);
  for (const target of targets) {
    say(`warming up: ${target.name} (${warmupSeconds} s)`);
    await load(target.url, warmupSeconds);
  }

  // The process tree of each setup, as the rounds will read it (an nginx is its master and its worker).
  const trees = Object.fromEntries(
    targets.map((target) => [target.name, treeCpuTime(target.pid)?.pids.length ?? null]),
  );

  // CPU time spent on the machine outside the bench's own process tree (every server, wrk and generator it
  // started) while the timed rounds run: another tenant's load makes every figure noisier.
  const outsideBench = () => {
    const [machineSeconds, benchSeconds] = [machineCpuSeconds(), cpuSeconds(process.pid)];
    return machineSeconds === null || benchSeconds === null ? NaN : machineSeconds - benchSeconds;
  };
  const timedFrom = { cpu: outsideBench(), wall: performance.now() };

  // CPU µs per request: user + system time of the setup's whole process tree (from /proc) over the round's
  // requests, timed rounds only; for a setup on Redis, also the bench's redis-server's script calls and
  // CPU time over the same requests.
  const results = new Map<string, Array<LoadResult & { cpuUs: number; redis: RedisCost | null }>>(
    targets.map((target) => [target.name, []]),
  );
  for (let round = 1; round <= rounds; round += 1) {
    for (const target of targets) {
      say(`round ${round}/${rounds}: ${target.name} (${seconds} s)`);
      const redisBefore = target.redis ? await meter.read() : null;
      const cpuBefore = cpuSeconds(target.pid);
      const result = await load(target.url);
      const cpuAfter = cpuSeconds(target.pid);
      const redisAfter = redisBefore ? await meter.read() : null;
      if (result.non2xx > 0) throw new Error(`${target.name}: ${result.non2xx} responses were not 2xx`);
      const cpuUs = cpuPerRequest(cpuBefore, cpuAfter, result.requests);
      const redis =
        redisBefore && redisAfter ? costPerRequest(redisBefore, redisAfter, result.requests) : null;
      results.get(target.name)!.push({ ...result, cpuUs, redis });
    }
  }
  // A setup against bare http-proxy-3 in the same round (its neighbour in time), then the median.
  const againstBare = <T>(runs: Map<string, T[]>, name: string, compare: (run: T, bare: T) => number) => {
    const bareRuns = runs.get(bareName)!;
    return median(runs.get(name)!.map((run, i) => compare(run, bareRuns[i]!)));
  };
  const rows: Row[] = targets
    .filter((target) => target.main)
    .map((target) => {
      const runs = results.get(target.name)!;
      const redisRuns = runs.flatMap((r) => (r.redis ? [r.redis] : []));
      return {
        name: target.name,
        rps: median(runs.map((r) => r.rps)),
        p50Ms: median(runs.map((r) => r.p50Ms)),
        p99Ms: median(runs.map((r) => r.p99Ms)),
        processes: trees[target.name] ?? null,
        cpuUs: median(runs.map((r) => r.cpuUs)),
        cpuVsBare: againstBare(results, target.name, (run, bare) => run.cpuUs / bare.cpuUs),
        redisCalls: target.redis ? median(redisRuns.map((r) => r.scriptCalls)) : null,
        redisCpuUs: target.redis ? median(redisRuns.map((r) => r.cpuUs)) : null,
      };
    });
  const ablationRows: AblationRow[] = ablation.map(({ layers, target }, i) => {
    const runs = results.get(target)!;
    const previous = i > 0 ? results.get(ablation[i - 1]!.target)! : null;
    return {
      layers,
      rps: median(runs.map((r) => r.rps)),
      cpuUs: median(runs.map((r) => r.cpuUs)),
      cpuVsBare: againstBare(results, target, (run, bare) => run.cpuUs / bare.cpuUs),
      addedUs: previous ? median(runs.map((run, round) => run.cpuUs - previous[round]!.cpuUs)) : null,
    };
  });

  // Latency at a fixed rate, open loop: the generator runs in its own process and sends on schedule;
  // the same setups are measured in interleaved rounds, with their process trees' CPU time over each run.
  const latencyNames = [bareName, memoryName, redisName, peerName];
  const latencyRuns = new Map<string, Array<OpenLoopResult & { cpuUs: number }>>(
    latencyNames.map((name) => [name, []]),
  );
  if (!values['skip-latency']) {
    for (let round = 1; round <= rounds; round += 1) {
      for (const name of latencyNames) {
        const target = targets.find((one) => one.name === name)!;
        say(
          `latency round ${round}/${rounds}: ${name} (${latencyRate} req/s, open loop, ${latencySeconds} s)`,
        );
        const cpuBefore = cpuSeconds(target.pid);
        const result = await runFixedRate({
          url: target.url,
          rate: latencyRate,
          seconds: latencySeconds,
          warmupSeconds: latencyWarmupSeconds,
          headers,
        });
        const cpuAfter = cpuSeconds(target.pid);
        if (result.non2xx > 0) throw new Error(`${name}: ${result.non2xx} responses were not 2xx`);
        const cpuUs = cpuPerRequest(cpuBefore, cpuAfter, result.answeredTotal);
        latencyRuns.get(name)!.push({ ...result, cpuUs });
      }
    }
  }
  // Side by side: bare http-proxy-3 and every quotagate setup loaded at the same time, each by its own
  // wrk, so that what the shared machine does meanwhile (steal time, neighbours) falls on all of them
  // alike; one round's ratios then compare setups under the same conditions. In one run on the 2-core
  // development machine, two copies of bare http-proxy-3 measured so came out within 1% of each other,
  // and 10% apart in rounds one after another.
  const sideNames = [bareName, ...targets.filter((t) => t.name.startsWith('quotagate')).map((t) => t.name)];
  const sideRuns = new Map<string, number[]>(sideNames.map((name) => [name, []]));
  const sideRounds = Number(values['side-rounds']);
  const sideSeconds = Number(values['side-seconds']);
  const sideConnections = Number(values['side-connections']);
  if (!values['skip-side']) {
    for (let round = 1; round <= sideRounds; round += 1) {
      say(`side-by-side round ${round}/${sideRounds}: ${sideNames.length} setups at once (${sideSeconds} s)`);
      const sideTargets = sideNames.map((name) => targets.find((one) => one.name === name)!);
      const before = sideTargets.map((target) => cpuSeconds(target.pid));
      const loads = await Promise.all(
        sideTargets.map((target) =>
          runLoad(wrk, { url: target.url, connections: sideConnections, seconds: sideSeconds, headers }),
        ),
      );
      sideTargets.forEach((target, i) => {
        if (loads[i]!.non2xx > 0)
          throw new Error(`${target.name}: ${loads[i]!.non2xx} responses were not 2xx`);
        sideRuns
          .get(target.name)!
          .push(cpuPerRequest(before[i]!, cpuSeconds(target.pid), loads[i]!.requests));
      });
    }
  }
  const sideRows: SideBySideRow[] = values['skip-side']
    ? []
    : sideNames.map((name) => {
        const ratios = sideRuns.get(name)!.map((cpuUs, round) => cpuUs / sideRuns.get(bareName)![round]!);
        return {
          name,
          cpuUs: median(sideRuns.get(name)!),
          cpuVsBare: median(ratios),
          lowest: Math.min(...ratios),
          highest: Math.max(...ratios),
        };
      });
  const outsideCores = (outsideBench() - timedFrom.cpu) / ((performance.now() - timedFrom.wall) / 1000);

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

  const soakSeconds = Number(values['soak-seconds']);
  say(`steady memory: quotagate (Redis store) under full load for ${soakSeconds} s`);
  const rss = () =>
    Number(execFileSync('ps', ['-o', 'rss=', '-p', String(shared.pid)], { encoding: 'utf8' }).trim()) * 1024;
  await load(`${shared.url}/pets/1`, 5);
  const rssWarm = rss();
  await load(`${shared.url}/pets/1`, soakSeconds);
  const rssAfter = rss();
  // The cases below count every script call Redis runs, so no gateway of the rounds may add its own.
  await shared.stop();

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
        pid: redisPid,
        fromSeconds: 10,
        forSeconds: 12,
      }),
    );
  }

  const machine = {
    cores: os.cpus().length,
    cpu: os.cpus()[0]?.model ?? 'unknown',
    node: process.version,
    redis: versionOf(redisServer!, ['--version']),
    nginx: nginx ? versionOf(nginx, ['-v']) : null,
    load: wrk ? versionOf(wrk, ['-v']) : 'autocannon',
    connections,
    seconds,
    rounds,
    latencyRate,
    latencySeconds,
    outsideCores,
  };
  const table = markdownTable(rows, bareName, nginx ? 'nginx proxy_pass, keep-alive' : null);
  const markdown = [
    `Machine: ${machine.cores} cores (${machine.cpu}), Node ${machine.node}, ${machine.redis}${machine.nginx ? `, ${machine.nginx}` : ''}, load by ${machine.load}; ${connections} connections, ${rounds} interleaved rounds of ${seconds} s, medians. Other processes on the machine used ${Number.isFinite(outsideCores) ? outsideCores.toFixed(2) : 'n/a'} cores on average during the timed rounds.`,
    '',
    table,
    '',
    `CPU µs/req: user + system time of the setup's whole process tree (its server process and every descendant, from /proc; "processes": how many there were) over the timed rounds only, divided by the requests wrk completed in them. "CPU vs bare": the setup's CPU µs/req over bare http-proxy-3's in the same round, median of the rounds.`,
    '',
    ...(sideRows.length
      ? [
          sideBySideTable(sideRows),
          '',
          `Side by side: bare http-proxy-3 and every quotagate setup loaded at the same time, each by its own wrk (one thread, ${sideConnections} connections), ${sideRounds} rounds of ${sideSeconds} s; CPU µs/req of each process tree as in the first table. "CPU vs bare": the setup's over bare's in the same round, median of the rounds, with the lowest and highest round. The machine's drift falls on every setup alike, so these ratios are steadier than the first table's; the absolute µs are higher, all setups sharing the cores.`,
          '',
        ]
      : []),
    ...(latencyRows.length
      ? [
          latencyTable(latencyRows, latencyRate),
          '',
          `Open loop (\`bench/open-loop.ts\`, its own process): ${latencyRate} requests a second on a fixed schedule whether or not earlier ones were answered, on a pool of keep-alive connections (a new one when none is idle, at most 256), ${latencyWarmupSeconds} s unrecorded then ${latencySeconds} s recorded per setup, ${rounds} interleaved rounds, medians. Latency runs from each request's scheduled send time (no coordinated omission); "generator lag" is the part of it spent before the request was written. "Added p99 over bare" and "CPU vs bare": against bare http-proxy-3 in the same round, median of the rounds. CPU µs/req here: the process tree's time over the run, divided by the requests it answered. "Late": requests that found all 256 connections busy; "failed": connection errors and requests unanswered 2 s after the last was due (a request whose kept-alive connection the server closed before any answer is sent once more, as HTTP clients do, and counted as retried in latest.json).`,
          '',
        ]
      : []),
    ...(ablationRows.length
      ? [
          ablationTable(ablationRows),
          '',
          `Same rounds as the first table (wrk, ${connections} connections), each row a gateway of its own; "added by the layer": the row's CPU µs/req minus the row above's in the same round, median of the rounds.`,
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
        rows,
        trees,
        latency: latencyRows,
        ablation: ablationRows,
        sideBySide: sideRows,
        sideRuns: Object.fromEntries(sideRuns),
        rssWarm,
        rssAfter,
        refusals,
        accuracy,
        runs: Object.fromEntries(results),
        latencyRuns: Object.fromEntries(latencyRuns),
      },
      null,
      2,
    )}\n`,
  );
  writeFileSync(path.join(resultsDir, 'latest.md'), markdown);
  writeFileSync(
    path.join(resultsDir, 'chart.svg'),
    svgChart(rows, `req/s at ${connections} connections (median of ${rounds} rounds)`),
  );
  process.stdout.write(`\n${markdown}\n`);
  say(`written: bench/results/latest.json, latest.md, chart.svg`);
}

async function stopAll(): Promise<void> {
  for (const child of running.splice(0).reverse()) await child.stop();
  rmSync(work, { recursive: true, force: true });
}

// Ctrl-C stops every server the bench started, by its pid, before the bench exits.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    say(`${signal}: stopping the bench servers`);
    void stopAll().finally(() => process.exit(130));
  });
}

try {
  await main();
} finally {
  await stopAll();
}
