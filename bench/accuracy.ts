import http from 'node:http';
import path from 'node:path';
import { benchKey, setSystemRestrictions, startQuotagate, type Gateway } from './quotagate.js';

export interface AccuracyResult {
  limit: number;
  windowSeconds: number;
  /** The most requests admitted in any interval of one window. */
  most: number;
  attempts: number;
  admitted: number;
  /** Times a gateway gave the decisions to store.onError because Redis was slower than commandTimeout. */
  fallbacks: number;
}

const limit = 100;
const windowSeconds = 10;
const runSeconds = 35;

/**
 * A fleet of 3 gateways on one Redis, hammered by a client that bursts around every aligned window
 * boundary (where fixed windows let twice the limit through) and trickles in between; reports the most
 * requests admitted in any sliding interval of one window, against the limit.
 */
export async function runAccuracyBench(
  dir: string,
  upstream: string,
  redisUrl: string,
  say: (line: string) => void,
  /** Store settings beyond the shared Redis, such as commandTimeout. */
  store: Record<string, unknown> = {},
): Promise<AccuracyResult> {
  const prefix = `accuracy:${Date.now()}:`;
  const gateways: Gateway[] = [];
  try {
    for (let i = 0; i < 3; i += 1) {
      gateways.push(
        await startQuotagate(path.join(dir, String(i)), upstream, {
          type: 'redis',
          url: redisUrl,
          prefix,
          ...store,
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
    await new Promise((resolve) => setTimeout(resolve, 1500));
    say(`accuracy: 3 gateways, limit ${limit} per ${windowSeconds} s, boundary bursts for ${runSeconds} s`);

    const agent = new http.Agent({ keepAlive: true, maxSockets: 200 });
    const authorization = `Basic ${Buffer.from(`${benchKey}:`).toString('base64')}`;
    const admittedAt: number[] = [];
    let attempts = 0;
    let next = 0;
    const send = () =>
      new Promise<void>((resolve) => {
        attempts += 1;
        const gateway = gateways[next++ % gateways.length]!;
        http
          .get(`${gateway.url}/pets/1`, { agent, headers: { authorization } }, (res) => {
            res.resume();
            res.on('end', () => {
              if (res.statusCode === 200) admittedAt.push(Date.now());
              resolve();
            });
          })
          .on('error', () => resolve());
      });
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
        /^quotagate_counter_store_switches_total\{to="(?:local|allow|deny)"\} (\d+)$/gm,
      )) {
        fallbacks += Number(match[1]);
      }
    }
    admittedAt.sort((a, b) => a - b);
    let most = 0;
    for (let i = 0, j = 0; i < admittedAt.length; i += 1) {
      while (admittedAt[i]! - admittedAt[j]! >= windowSeconds * 1000) j += 1;
      most = Math.max(most, i - j + 1);
    }
    return { limit, windowSeconds, most, attempts, admitted: admittedAt.length, fallbacks };
  } finally {
    for (const gateway of gateways) await gateway.stop();
  }
}
