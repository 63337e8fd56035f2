import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { greeterApi } from '../helpers/grpc-greeter.js';
import { petsConfig, writeConfigDir } from '../helpers/test-gateway.js';

/** The rules across keys that a config may pass: each bad-config fixture of load-config.test.ts fails one. */
describe('the rules across keys', () => {
  it('take a gRPC API with a pool of targets: its calls are balanced per call', async () => {
    const targets = ['http://127.0.0.1:50051', { url: 'http://127.0.0.1:50052/', weight: 3 }];
    const outlierDetection = { consecutiveFailures: 3, ejectTime: 10_000 };
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9', {
        apis: [{ ...greeterApi('http://127.0.0.1:9'), upstream: { targets, outlierDetection, retries: 1 } }],
      }),
    );
    try {
      const { config } = await loadConfig({ configDir: dir, env: {} });
      expect(config.apis[0]?.upstream).toMatchObject({ targets, outlierDetection, retries: 1 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [{ service: 'helloworld.Greeter' }, 'helloworld.Greeter'],
    [{}, undefined],
  ])("take a gRPC API's health checks of a service, or of the whole server (%j)", async (form, service) => {
    const healthCheck = { interval: 5_000, timeout: 1_000, ...form };
    const targets = ['http://127.0.0.1:50051', 'http://127.0.0.1:50052'];
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9', {
        apis: [{ ...greeterApi('http://127.0.0.1:9'), upstream: { targets, healthCheck } }],
      }),
    );
    try {
      const { config } = await loadConfig({ configDir: dir, env: {} });
      const upstream = config.apis[0]?.upstream as { healthCheck: Record<string, unknown> };
      expect(upstream.healthCheck).toEqual({ ...healthCheck, service, unhealthyAfter: 2, healthyAfter: 2 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
