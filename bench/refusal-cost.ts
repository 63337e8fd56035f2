import http from 'node:http';
import path from 'node:path';
import { getStatus } from './client.js';
import { setSystemRestrictions, startQuotagate, type Gateway } from './quotagate.js';
import type { RedisMeter } from './redis-usage.js';

export interface RefusalCost {
  gateways: number;
  limit: number;
  requests: number;
  admitted: number;
  refused: number;
  /** Redis script calls while admitted requests were answered, and while refused ones were. */
  callsAdmitted: number;
  callsRefused: number;
  /**
   * The same, counted by the gateway that answered (`quotagate_store_trips_total`): its counter
   * trips alone, without the heartbeat every gateway sends once a second.
   */
  tripsAdmitted: number;
  tripsRefused: number;
}

/** Counter trips a gateway has made, from its /metrics. */
async function tripsOf(gateway: Gateway): Promise<number> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  return Number(/^quotagate_store_trips_total (\d+)$/m.exec(text)?.[1] ?? 0);
}

const limit = 20;
const requests = 200;
const everyMs = 15;

/**
 * A System quota of 20 requests per minute on the Redis store, and 200 requests one after another, one
 * every 15 ms, spread over `gatewayCount` gateways in turn: 20 admitted, the rest refused. Redis is read
 * after each request's pause, so each script call is counted against the request that caused it, even
 * one the gateway makes after answering.
 */
export async function runRefusalCost(
  dir: string,
  upstream: string,
  redisUrl: string,
  meter: RedisMeter,
  gatewayCount: number,
  say: (line: string) => void,
): Promise<RefusalCost> {
  const store = { type: 'redis', url: redisUrl, prefix: `refusals-${gatewayCount}:${Date.now()}:` };
  const gateways: Gateway[] = [];
  try {
    // The first gateway applies its own change at once; the others load it from Redis as they start.
    gateways.push(await startQuotagate(path.join(dir, '0'), upstream, store));
    await setSystemRestrictions(gateways[0]!, [
      { api: '*', method: '*', type: 'throttle', config: { messages: limit, per: 1, period: 'minute' } },
    ]);
    for (let i = 1; i < gatewayCount; i += 1) {
      gateways.push(await startQuotagate(path.join(dir, String(i)), upstream, store));
    }
    say(
      `limit ${limit} per minute: ${requests} requests over ${gatewayCount} gateway(s), one every ${everyMs} ms`,
    );

    const agent = new http.Agent({ keepAlive: true });
    const result: RefusalCost = {
      gateways: gatewayCount,
      limit,
      requests,
      admitted: 0,
      refused: 0,
      callsAdmitted: 0,
      callsRefused: 0,
      tripsAdmitted: 0,
      tripsRefused: 0,
    };
    let before = await meter.read();
    for (let i = 0; i < requests; i += 1) {
      const gateway = gateways[i % gatewayCount]!;
      const tripsBefore = await tripsOf(gateway);
      const due = performance.now() + everyMs;
      const status = await getStatus(`${gateway.url}/pets/1`, agent);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
      const after = await meter.read();
      const calls = after.scriptCalls - before.scriptCalls;
      const trips = (await tripsOf(gateway)) - tripsBefore;
      before = after;
      if (status === 200) {
        result.admitted += 1;
        result.callsAdmitted += calls;
        result.tripsAdmitted += trips;
      } else if (status === 429) {
        result.refused += 1;
        result.callsRefused += calls;
        result.tripsRefused += trips;
      } else {
        throw new Error(`limit ${limit} per minute: a request was answered ${status}, not 200 or 429`);
      }
    }
    agent.destroy();
    return result;
  } finally {
    for (const gateway of gateways) await gateway.stop();
  }
}
