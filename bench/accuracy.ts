import http from 'node:http';
import path from 'node:path';
import { startArrivalUpstream } from './arrival-upstream.js';
import { getStatus } from './client.js';
import { setSystemRestrictions, startQuotagate, type Gateway } from './quotagate.js';

/** The bench's redis-server, stopped (SIGSTOP) `fromSeconds` into the run for `forSeconds`. */
export interface Freeze {
  pid: number;
  fromSeconds: number;
  forSeconds: number;
}

/** Requests admitted, and the most of them in any interval of one window. */
export interface Admissions {
  admitted: number;
  most: number;
}

export interface AccuracyResult {
  name: string;
  limit: number;
  windowSeconds: number;
  /** The most the fleet may admit in a window: the limit, plus one gateway's share while Redis is frozen. */
  target: number;
  attempts: number;
  /** Counted where it matters: arrivals at the upstream. */
  upstream: Admissions;
  /** Counted at the client, by 200 answers, for comparison. */
  client: Admissions;
  /** Times a gateway gave the decisions to store.onError because Redis was slower than commandTimeout. */
  fallbacks: number;
}

const limit = 100;
const windowSeconds = 10;
const runSeconds = 35;
const gatewayCount = 3;

/**
 * A fleet of 3 gateways on one Redis in front of an upstream inside the bench process, hammered by a
 * client that bursts around every aligned window boundary (where fixed windows let twice the limit
 * through) and trickles in between; reports the most requests that reached the upstream in any sliding
 * interval of one window, against the limit. With `freeze`, Redis stops answering for part of the run
 * and the gateways decide with their own counters (store.onError: local).
 */
export async function runAccuracyBench(
  dir: string,
  redisUrl: string,
  say: (line: string) => void,
  freeze: Freeze | null = null,
): Promise<AccuracyResult> {
  const name = freeze
    ? `Redis frozen from ${freeze.fromSeconds} s for ${freeze.forSeconds} s, onError local`
    : 'Redis answering';
  const prefix = `accuracy:${Date.now()}:`;
  const upstream = await startArrivalUpstream();
  const gateways: Gateway[] = [];
  let thaw = () => {};
  try {
    for (let i = 0; i < gatewayCount; i += 1) {
      gateways.push(
        await startQuotagate(path.join(dir, String(i)), upstream.url, {
          type: 'redis',
          url: redisUrl,
          prefix,
          onError: 'local',
        }),
      );
    }
    await setSystemRestrictions(gateways[0]!, [
      {
        api: '*',
        method: '*',
        type: 'throttle',
        config: { messages: limit, per: windowSeconds, period: 'seconds' },
      },
    ]);
    // The other gateways learn of the change by Redis pub/sub.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    say(
      `accuracy (${name}): ${gatewayCount} gateways, limit ${limit} per ${windowSeconds} s, boundary bursts for ${runSeconds} s`,
    );

    const agent = new http.Agent({ keepAlive: true, maxSockets: 200 });
    const admittedAt: number[] = [];
    let attempts = 0;
    const send = async () => {
      const gateway = gateways[attempts++ % gateways.length]!;
      if ((await getStatus(`${gateway.url}/pets/1`, agent)) === 200) admittedAt.push(performance.now());
    };
    if (freeze) thaw = scheduleFreeze(freeze, say);
    const started = Date.now();
    const inFlight: Array<Promise<void>> = [];
    while (Date.now() - started < runSeconds * 1000) {
      const phase = Date.now() % (windowSeconds * 1000);
      const nearBoundary = phase > windowSeconds * 1000 - 300 || phase < 300;
      for (let i = 0; i < (nearBoundary ? 40 : 2); i += 1) inFlight.push(send());
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await Promise.all(inFlight);
    agent.destroy();

    let fallbacks = 0;
    for (const gateway of gateways) {
      const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
      for (const match of metrics.matchAll(
        /^quotagate_store_switches_total\{to="(?:local|allow|deny)"\} (\d+)$/gm,
      )) {
        fallbacks += Number(match[1]);
      }
    }
    const windowMs = windowSeconds * 1000;
    return {
      name,
      limit,
      windowSeconds,
      target: freeze ? limit + Math.ceil(limit / gatewayCount) : limit,
      attempts,
      upstream: { admitted: upstream.arrivals.length, most: mostInAnyWindow(upstream.arrivals, windowMs) },
      client: { admitted: admittedAt.length, most: mostInAnyWindow(admittedAt, windowMs) },
      fallbacks,
    };
  } finally {
    thaw();
    for (const gateway of gateways) await gateway.stop();
    await upstream.close();
  }
}

/** Stops the process when the freeze begins and continues it when it ends; the returned function continues it now. */
function scheduleFreeze({ pid, fromSeconds, forSeconds }: Freeze, say: (line: string) => void): () => void {
  let frozen = false;
  const stop = setTimeout(() => {
    process.kill(pid, 'SIGSTOP');
    frozen = true;
    say(`accuracy: redis-server stopped (SIGSTOP) for ${forSeconds} s`);
  }, fromSeconds * 1000);
  const resume = setTimeout(thaw, (fromSeconds + forSeconds) * 1000);
  function thaw() {
    clearTimeout(stop);
    clearTimeout(resume);
    if (!frozen) return;
    process.kill(pid, 'SIGCONT');
    frozen = false;
    say('accuracy: redis-server continued (SIGCONT)');
  }
  return thaw;
}

/** The most of `times` (milliseconds) that fall in any half-open interval of `windowMs`. */
function mostInAnyWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i += 1) {
    while (sorted[i]! - sorted[j]! >= windowMs) j += 1;
    most = Math.max(most, i - j + 1);
  }
  return most;
}
