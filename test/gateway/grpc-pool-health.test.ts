import { status } from '@grpc/grpc-js';
import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { credentials } from '../helpers/grpc-credentials.js';
import { greeterApi, greeterClient, startGreeterUpstream } from '../helpers/grpc-greeter.js';
import { startHealthUpstream, type HealthUpstream } from '../helpers/grpc-health.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * The active health checks of a gRPC API's pool: each target is asked grpc.health.v1.Health/Check, as
 * Envoy's `grpc_health_check` asks it, and a target whose service is not SERVING takes no calls.
 */
const defer = cleanupAfterEach();

const healthCheck = {
  service: 'helloworld.Greeter',
  interval: 1_000,
  timeout: 500,
  unhealthyAfter: 2,
  healthyAfter: 2,
};

async function healthTarget(): Promise<HealthUpstream> {
  const upstream = await startHealthUpstream();
  upstream.statuses.set('helloworld.Greeter', 'SERVING');
  defer(() => upstream.close());
  return upstream;
}

const urlOf = (upstream: { address: string }) => `http://${upstream.address}`;

async function gatewayOver(upstream: Record<string, unknown>, clock: FakeClock): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig('http://127.0.0.1:9', { apis: [{ ...greeterApi('http://127.0.0.1:9'), upstream }] }),
    {},
    { timers: clock },
  );
  defer(() => gateway.close());
  return gateway;
}

/** Waits for the log line `msg` about `targetUrl`: the checks' I/O is real, their time is the clock's. */
async function logged(gateway: TestGateway, msg: string, targetUrl: string): Promise<void> {
  await vi.waitFor(() =>
    expect(gateway.logs.some((line) => line.msg === msg && line.target === targetUrl)).toBe(true),
  );
}

/** The codes of `count` SayHello calls through the gateway, one after another. */
async function sayHelloMany(gateway: TestGateway, count: number): Promise<number[]> {
  const client = greeterClient(new URL(gateway.url).host);
  defer(async () => client.close());
  const codes: number[] = [];
  for (let i = 0; i < count; i += 1)
    codes.push((await client.sayHello(`ann${i}`, credentials())).status.code);
  return codes;
}

describe('the gRPC health checks of a pool', () => {
  it('take a target NOT_SERVING out after two checks, and bring it back after two SERVING ones', async () => {
    const clock = new FakeClock();
    const [a, b] = [await healthTarget(), await healthTarget()];
    a.statuses.set('helloworld.Greeter', 'NOT_SERVING');
    const gateway = await gatewayOver({ targets: [urlOf(a), urlOf(b)], healthCheck }, clock);
    // The first check runs as the gateway starts; the second after one interval.
    await clock.advance(healthCheck.interval);
    await logged(gateway, 'upstream target out: its health checks fail', urlOf(a));
    expect(new Set(await sayHelloMany(gateway, 10))).toEqual(new Set([status.OK]));
    expect(a.calls).toHaveLength(0);
    expect(b.calls).toHaveLength(10);
    expect(a.checked).toEqual(['helloworld.Greeter', 'helloworld.Greeter']);

    a.statuses.set('helloworld.Greeter', 'SERVING');
    await clock.advance(healthCheck.interval);
    await vi.waitFor(() => expect(a.checked).toHaveLength(3));
    expect(gateway.logs.some(({ msg }) => msg === 'upstream target back: its health checks pass')).toBe(
      false,
    );
    await clock.advance(healthCheck.interval);
    await logged(gateway, 'upstream target back: its health checks pass', urlOf(a));
    await sayHelloMany(gateway, 10);
    expect(a.calls).toHaveLength(5);
    expect(b.calls).toHaveLength(15);
  });

  it('take a target without the health service out (12 UNIMPLEMENTED), as Envoy does', async () => {
    const clock = new FakeClock();
    const bare = await startGreeterUpstream();
    defer(() => bare.close());
    const b = await healthTarget();
    const gateway = await gatewayOver({ targets: [urlOf(bare), urlOf(b)], healthCheck }, clock);
    await clock.advance(healthCheck.interval);
    await logged(gateway, 'upstream target out: its health checks fail', urlOf(bare));
    expect(new Set(await sayHelloMany(gateway, 4))).toEqual(new Set([status.OK]));
    expect(bare.calls).toHaveLength(0);
    expect(b.calls).toHaveLength(4);
  });
});
