import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  codeEnvNames,
  compose,
  composeConfEnvNames,
  composeConfig,
  composeGateways,
  timeSpanMs,
} from '../helpers/deploy-files.js';

describe('deploy/compose.yaml', () => {
  it('runs two gateways with the Redis store on one Redis that has append-only persistence on', () => {
    expect(composeGateways).toHaveLength(2);
    const store = composeConfig.store;
    if (store.type !== 'redis') throw new Error('the compose gateways must use the Redis store');
    const redisService = compose.services[new URL(store.url!).hostname];
    expect(redisService?.command).toEqual(expect.arrayContaining(['--appendonly', 'yes']));
    const appendonly = redisService!.command!.indexOf('--appendonly');
    expect(redisService!.command![appendonly + 1]).toBe('yes');
  });

  it("publishes each gateway's data port, and its admin port on the host's 127.0.0.1 only", () => {
    expect(composeConfig.admin.host).toBe('0.0.0.0');
    for (const [, service] of composeGateways) {
      const published = service.ports!.map((mapping) => {
        const parts = mapping.split(':');
        return { hostIp: parts.length === 3 ? parts[0] : undefined, container: Number(parts.at(-1)) };
      });
      expect(published.map((port) => port.container).sort()).toEqual(
        [composeConfig.port, composeConfig.admin.port].sort(),
      );
      expect(published.find((port) => port.container === composeConfig.admin.port)?.hostIp).toBe('127.0.0.1');
    }
  });

  it('passes every variable its config reads, and nothing the gateway and its config do not read', () => {
    for (const [, service] of composeGateways) {
      const names = Object.keys(service.environment!);
      for (const name of composeConfEnvNames) expect(names).toContain(name);
      for (const name of names)
        expect(composeConfEnvNames.has(name) || codeEnvNames.has(name), name).toBe(true);
      expect(service.environment!.NODE_ENV).toBe('production');
    }
  });

  it('gives a gateway longer to stop than shutdownTimeout, and a read-only filesystem', () => {
    for (const [, service] of composeGateways) {
      expect(timeSpanMs(service.stop_grace_period!)).toBeGreaterThan(composeConfig.shutdownTimeout);
      expect(service.read_only).toBe(true);
    }
  });

  it('runs the demo upstream from a module the build really has, under the host name the config names', () => {
    const upstream = new URL(composeConfig.apis[0]!.upstream);
    const service = compose.services[upstream.hostname]!;
    const script = service.command!.at(-1)!;
    const module = /import\('\.\/(dist\/[^']+)'\)/.exec(script)![1]!;
    expect(existsSync(module), module).toBe(true);
    expect(script).toContain(`startDemoUpstream(${upstream.port}, '0.0.0.0')`);
  });
});
