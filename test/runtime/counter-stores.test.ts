import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig, type LoadedConfig } from '../../src/config/load-config.js';
import type { CounterSpec } from '../../src/limiter/counter-store.js';
import type { LimiterVerdict } from '../../src/limiter/limiter.js';
import { MemoryCounterStore } from '../../src/limiter/memory-counter-store.js';
import { MemoryCounterTrips } from '../../src/limiter/memory-counter-trips.js';
import { createLogger } from '../../src/observe/log.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { Closers } from '../../src/runtime/closers.js';
import { counterBackend, createCounterStores } from '../../src/runtime/counter-stores.js';
import { envOf } from '../../src/runtime/env.js';
import type { PrimaryFeeds, Role } from '../../src/runtime/role.js';
import { serveCounterTrips } from '../../src/workers/ipc-counter-trips.js';
import { IpcPeer } from '../../src/workers/ipc-peer.js';
import { NumberedFeed } from '../../src/workers/numbered-feed.js';
import { DefinitionsFeed } from '../../src/workers/definitions-feed.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { ipcPair } from '../helpers/ipc-pair.js';
import { petsConfig, writeConfigDir } from '../helpers/test-gateway.js';

/**
 * The one switch of the counters' backend (src/runtime/counter-stores.ts), built without a gateway: the
 * store and the role decide whether a data plane counts alone, in Redis, or in its primary over IPC.
 */
const defer = cleanupAfterEach();
const logger = createLogger({ level: 'silent' });

async function configOf(overrides: Record<string, unknown> = {}): Promise<LoadedConfig> {
  const dir = writeConfigDir(petsConfig('http://127.0.0.1:9/pets', overrides));
  defer(() => rmSync(dir, { recursive: true, force: true }));
  return loadConfig({ configDir: dir, env: {} });
}

/** A worker's feeds, with the channel `primary` to its primary. */
function feedsOf(primary: IpcPeer, primaryCounters: boolean): PrimaryFeeds {
  return {
    definitions: new DefinitionsFeed(),
    applications: new NumberedFeed(),
    adminPort: 0,
    primary,
    primaryCounters,
    workers: 2,
  };
}

const oneCall: CounterSpec = { key: 'q:0:k', limit: 1, windowMs: 60_000, cost: 1, need: 1 };
const allowed = (verdict: LimiterVerdict) => verdict !== 'unavailable' && verdict.allowed;

describe('the counters of a data plane', () => {
  it('are this process’s memory alone, Redis with the Redis store, the primary’s for a fed worker', async () => {
    const memory = (await configOf()).config;
    const redis = (await configOf({ store: { type: 'redis', url: 'redis://127.0.0.1:1', prefix: 'p:' } }))
      .config;
    const pair = ipcPair();
    const fed: Role = { kind: 'worker', feeds: feedsOf(new IpcPeer(pair.worker), true) };
    const thread: Role = { kind: 'worker', feeds: feedsOf(new IpcPeer(pair.worker), false) };
    expect(counterBackend(memory, { kind: 'single' })).toBe('memory');
    expect(counterBackend(memory, thread)).toBe('memory');
    expect(counterBackend(memory, fed)).toBe('ipc');
    expect(counterBackend(redis, { kind: 'single' })).toBe('redis');
    expect(counterBackend(redis, fed)).toBe('redis');
  });

  it('count alone on the memory store: the second call over a limit of one is refused', async () => {
    const { config } = await configOf();
    const closers = new Closers(logger);
    const metrics = createMetrics();
    const counters = await createCounterStores(
      config,
      { kind: 'single' },
      envOf({ logger }),
      { redis: null, metrics },
      closers,
    );
    defer(() => closers.close());
    expect(counters.backend).toBe('memory');
    expect(counters.liveGateways).toBeNull();
    expect(allowed(await counters.limiter.consume([oneCall]))).toBe(true);
    expect(allowed(await counters.limiter.consume([oneCall]))).toBe(false);
    expect((await counters.limiter.usage('q:0:', 60_000)).map(({ used }) => used)).toEqual([1]);
  });

  it('count in the primary over IPC for a worker of workers: N, which knows it shares them', async () => {
    const { config } = await configOf();
    const pair = ipcPair();
    defer(() => pair.close());
    const primaryStore = new MemoryCounterStore();
    defer(() => primaryStore.close());
    serveCounterTrips(new IpcPeer(pair.primary), new MemoryCounterTrips(primaryStore), 'worker 1');
    const closers = new Closers(logger);
    const role: Role = { kind: 'worker', feeds: feedsOf(new IpcPeer(pair.worker), true) };
    const counters = await createCounterStores(
      config,
      role,
      envOf({ logger }),
      { redis: null, metrics: createMetrics({ sharedCounters: true }) },
      closers,
    );
    expect(counters.backend).toBe('ipc');
    expect(counters.liveGateways?.()).toBe(2);
    expect(allowed(await counters.limiter.consume([oneCall]))).toBe(true);
    // The limiter hands its leases back as it closes: what was spent is the primary's count.
    await closers.close();
    await expect
      .poll(async () => (await primaryStore.usage('q:0:', 60_000)).map(({ used }) => used))
      .toEqual([1]);
  });
});
