import { readFileSync } from 'node:fs';
import { describe, expect, inject, it } from 'vitest';
import YAML from 'yaml';
import { hashPassword } from '../../src/kit/password-hash.js';
import {
  composeConfFile,
  composeGateways,
  configMapData,
  configMapSource,
  gatewayContainer,
  interpolate,
  isolatedPrefix,
  newKey,
  podEnv,
  projectedFiles,
  runHealthcheck,
  secretData,
  secretSource,
  useDeployRuns,
} from '../helpers/deploy-files.js';

const { configDir, startGateway } = useDeployRuns();

describe('gateway start with the configs deploy/ ships', () => {
  it("starts with the ConfigMap and a filled-in Secret, answers the pod's probes and the image's HEALTHCHECK, and exits 0 on SIGTERM", async () => {
    const secret = YAML.parseDocument(projectedFiles(secretSource, secretData)[`${podEnv.NODE_ENV}.yaml`]!);
    secret.setIn(['apikey_production'], newKey());
    secret.setIn(['admin', 'users', 0, 'password'], await hashPassword(newKey()));
    secret.setIn(['store'], secret.createNode(isolatedPrefix().store));
    const dir = configDir({
      ...projectedFiles(configMapSource, configMapData),
      [`${podEnv.NODE_ENV}.yaml`]: secret.toString(),
    });

    // The ConfigMap's fixed ports may be taken here: PORT and ADMIN_PORT move them, REDIS_URL picks the test's Redis.
    const { cli, ports } = await startGateway(dir, {
      ...podEnv,
      PORT: '0',
      ADMIN_PORT: '0',
      REDIS_URL: inject('redisUrl'),
    });
    const admin = `http://127.0.0.1:${ports.admin}`;
    for (const probe of [gatewayContainer.readinessProbe, gatewayContainer.livenessProbe])
      expect((await fetch(`${admin}${probe.httpGet.path}`)).status, probe.httpGet.path).toBe(200);
    expect((await fetch(`http://127.0.0.1:${ports.http}/pets/1`)).status).toBe(401);
    expect(await runHealthcheck(ports.admin)).toBe(0);

    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    expect(await runHealthcheck(ports.admin)).not.toBe(0);
  });

  it('starts with the compose config and the environment compose passes, accepts its admin hash and key, and exits 0 on SIGTERM', async () => {
    const adminPassword = newKey();
    const dotenv = {
      APIKEY_PRODUCTION: newKey(),
      QUOTAGATE_ADMIN_PASSWORD_HASH: await hashPassword(adminPassword),
    };
    const environment = interpolate(composeGateways[0]![1].environment!, dotenv);
    const dir = configDir({
      'default.cjs': readFileSync(composeConfFile, 'utf8'),
      [`${environment.NODE_ENV}.yaml`]: YAML.stringify(isolatedPrefix()),
    });

    const { cli, ports } = await startGateway(dir, {
      ...environment,
      PORT: '0',
      ADMIN_PORT: '0',
      REDIS_URL: inject('redisUrl'),
    });
    const admin = `http://127.0.0.1:${ports.admin}`;
    expect((await fetch(`${admin}/healthz`)).status).toBe(200);
    expect((await fetch(`${admin}/readyz`)).status).toBe(200);
    const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString('base64')}`;
    const quotas = await fetch(`${admin}/api/portal/v1.3/quotas`, {
      headers: { authorization: basic(`admin:${adminPassword}`) },
    });
    expect(quotas.status).toBe(200);
    // The key is accepted: the request gets as far as the upstream, whose compose host name is unknown here.
    const proxied = await fetch(`http://127.0.0.1:${ports.http}/pets/1`, {
      headers: { authorization: basic(`${dotenv.APIKEY_PRODUCTION}:`) },
    });
    expect(proxied.status).toBe(502);

    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
  });
});
