import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runAccuracyBench, type AccuracyResult } from './accuracy.js';
import { cpuSeconds } from './cpu-time.js';
import { runLoad, type LoadResult } from './load.js';
import { freePort, listening, start, type Running } from './processes.js';
import {
  benchAuthorization,
  benchKey,
  neverRejecting,
  setSystemRestrictions,
  startQuotagate,
} from './quotagate.js';
import { costPerRequest, RedisMeter, type RedisCost } from './redis-usage.js';
import { runRefusalCost, type RefusalCost } from './refusal-cost.js';
import { accuracyTable, markdownTable, median, refusalTable, svgChart, type Row } from './report.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '5' },
    'warmup-seconds': { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    'soak-seconds': { type: 'string', default: '60' },
    'skip-accuracy': { type: 'boolean', default: false },
  },
});
const seconds = Number(values.seconds);
const rounds = Math.max(3, Number(values.rounds));
const connections = Number(values.connections);

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

  // `pid`: the process whose CPU time a request of this setup costs (the upstream's for the direct one);
  // `redis`: whether its requests use the bench's redis-server, whose calls and CPU time are then read too.
  const targets: Array<{ name: string; url: string; pid: number; redis: boolean }> = [
    {
      name: `direct to the upstream (${nginx ? 'nginx return 200' : 'Node'})`,
      url: `${upstream}/pets/1`,
      pid: upstreamServer.pid,
      redis: false,
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
    name: 'bare http-proxy-3, keep-alive',
    url: `http://127.0.0.1:${barePort}/pets/1`,
    pid: bare.child.pid!,
    redis: false,
  });

  const memory = await startTracked(startQuotagate(path.join(work, 'memory'), upstream, { type: 'memory' }));
  await setSystemRestrictions(memory, neverRejecting);
  targets.push({
    name: 'quotagate, memory store',
    url: `${memory.url}/pets/1`,
    pid: memory.pid,
    redis: false,
  });

  const shared = await startTracked(
    startQuotagate(path.join(work, 'redis'), upstream, { type: 'redis', url: redisUrl, prefix: 'bench:' }),
  );
  await setSystemRestrictions(shared, neverRejecting);
  targets.push({
    name: 'quotagate, Redis store',
    url: `${shared.url}/pets/1`,
    pid: shared.pid,
    redis: true,
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
    name: 'fast-gateway + rate-limiter-flexible (Redis)',
    url: `http://127.0.0.1:${peerPort}/pets/1`,
    pid: peer.child.pid!,
    redis: true,
  });

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

  // CPU µs per request: the setup's process time (user + system, from /proc) over the round's requests;
  // for a setup on Redis, also the bench's redis-server's script calls and CPU time over the same requests.
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
      const cpuUs =
        cpuBefore === null || cpuAfter === null
          ? NaN
          : ((cpuAfter - cpuBefore) * 1e6) / Math.max(1, result.requests);
      const redis =
        redisBefore && redisAfter ? costPerRequest(redisBefore, redisAfter, result.requests) : null;
      results.get(target.name)!.push({ ...result, cpuUs, redis });
    }
  }
  const rows: Row[] = targets.map((target) => {
    const runs = results.get(target.name)!;
    const redisRuns = runs.flatMap((r) => (r.redis ? [r.redis] : []));
    return {
      name: target.name,
      rps: median(runs.map((r) => r.rps)),
      p50Ms: median(runs.map((r) => r.p50Ms)),
      p99Ms: median(runs.map((r) => r.p99Ms)),
      cpuUs: median(runs.map((r) => r.cpuUs)),
      redisCalls: target.redis ? median(redisRuns.map((r) => r.scriptCalls)) : null,
      redisCpuUs: target.redis ? median(redisRuns.map((r) => r.cpuUs)) : null,
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
  };
  const bareName = 'bare http-proxy-3, keep-alive';
  const table = markdownTable(rows, bareName, nginx ? 'nginx proxy_pass, keep-alive' : null);
  const markdown = [
    `Machine: ${machine.cores} cores (${machine.cpu}), Node ${machine.node}, ${machine.redis}${machine.nginx ? `, ${machine.nginx}` : ''}, load by ${machine.load}; ${connections} connections, ${rounds} interleaved rounds of ${seconds} s, medians.`,
    '',
    table,
    '',
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
    `${JSON.stringify({ machine, rows, rssWarm, rssAfter, refusals, accuracy, runs: Object.fromEntries(results) }, null, 2)}\n`,
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
