import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { runCli } from '../helpers/run-cli.js';
import {
  type Manifest,
  manifestFiles,
  codeEnvNames,
  configMapConfig,
  configMapData,
  configMapSource,
  containerPort,
  deployment,
  gatewayContainer,
  imageConfigDir,
  kubernetesDir,
  manifest,
  manifests,
  podEnv,
  podSpec,
  projectedFiles,
  secretData,
  secretSource,
  useDeployRuns,
} from '../helpers/deploy-files.js';

const { configDir } = useDeployRuns();

describe('deploy/kubernetes', () => {
  it('lists every manifest in kustomization.yaml', () => {
    const kustomization = YAML.parse(
      readFileSync(path.join(kubernetesDir, 'kustomization.yaml'), 'utf8'),
    ) as {
      resources: string[];
    };
    expect([...kustomization.resources].sort()).toEqual([...manifestFiles].sort());
  });

  it('configures the Redis store and an admin listener on all interfaces, for the kubelet and Prometheus', () => {
    expect(configMapConfig.store.type).toBe('redis');
    expect(configMapConfig.admin.host).toBe('0.0.0.0');
    expect(podEnv.NODE_ENV).toBe('production');
    for (const name of Object.keys(podEnv)) expect(codeEnvNames, name).toContain(name);
  });

  it('probes readiness on /readyz and liveness on /healthz, on the admin port of the config', () => {
    expect(gatewayContainer.readinessProbe.httpGet.path).toBe('/readyz');
    expect(gatewayContainer.livenessProbe.httpGet.path).toBe('/healthz');
    for (const probe of [gatewayContainer.readinessProbe, gatewayContainer.livenessProbe])
      expect(containerPort(probe.httpGet.port)).toBe(configMapConfig.admin.port);
    expect(containerPort('http')).toBe(configMapConfig.port);
    const { annotations } = deployment.spec.template.metadata;
    expect(Number(annotations['prometheus.io/port'])).toBe(configMapConfig.admin.port);
  });

  it('exposes the data port on the main Service and the admin port only on a ClusterIP Service', () => {
    interface Service {
      spec: { type?: string; selector: Record<string, string>; ports: Array<{ targetPort: string }> };
    }
    const services = manifests.filter((candidate) => candidate.kind === 'Service') as Array<
      Manifest & Service
    >;
    const selecting = services.filter(
      (service) =>
        JSON.stringify(service.spec.selector) === JSON.stringify(deployment.spec.selector.matchLabels),
    );
    const byTarget = (port: string) =>
      selecting.filter((service) => service.spec.ports.some((entry) => entry.targetPort === port));
    expect(byTarget('http').map((service) => service.metadata.name)).toEqual(['quotagate']);
    for (const service of byTarget('admin')) {
      expect(service.spec.ports.map((entry) => entry.targetPort)).toEqual(['admin']);
      expect(service.spec.type ?? 'ClusterIP').toBe('ClusterIP');
    }
  });

  it('gives a pod longer to stop than its preStop pause plus shutdownTimeout', () => {
    const [command, seconds] = gatewayContainer.lifecycle.preStop.exec.command;
    expect(command).toBe('sleep');
    expect(podSpec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(
      Number(seconds) * 1000 + configMapConfig.shutdownTimeout,
    );
  });

  it('runs the gateway non-root on a read-only root filesystem, without privilege escalation or capabilities', () => {
    expect(podSpec.securityContext.runAsNonRoot).toBe(true);
    const { securityContext, resources } = gatewayContainer;
    expect(securityContext.readOnlyRootFilesystem).toBe(true);
    expect(securityContext.allowPrivilegeEscalation).toBe(false);
    expect(securityContext.capabilities.drop).toEqual(['ALL']);
    expect(resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(resources.limits.memory).toEqual(expect.any(String));
  });

  it("mounts the ConfigMap as default.yaml and the Secret as the NODE_ENV overlay in the image's conf folder", () => {
    expect(Object.keys(projectedFiles(configMapSource, configMapData))).toEqual(['default.yaml']);
    expect(Object.keys(projectedFiles(secretSource, secretData))).toEqual([`${podEnv.NODE_ENV}.yaml`]);
    expect(gatewayContainer.volumeMounts.find((mount) => mount.mountPath === imageConfigDir)?.readOnly).toBe(
      true,
    );
  });

  it('keeps at least one pod through disruptions and scales the Deployment from two replicas', () => {
    const pdb = manifest<{ spec: { minAvailable: number; selector: { matchLabels: unknown } } }>(
      'PodDisruptionBudget',
      'quotagate',
    );
    expect(pdb.spec.minAvailable).toBeGreaterThanOrEqual(1);
    expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    const hpa = manifest<{ spec: { scaleTargetRef: { kind: string; name: string }; minReplicas: number } }>(
      'HorizontalPodAutoscaler',
      'quotagate',
    );
    expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: deployment.metadata.name });
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(deployment.spec).not.toHaveProperty('replicas');
  });

  it('refuses to start while the Secret still holds its empty placeholders, naming each of them', async () => {
    const dir = configDir({
      ...projectedFiles(configMapSource, configMapData),
      ...projectedFiles(secretSource, secretData),
    });
    const result = await runCli(['check-config', '--config-dir', dir], { cwd: dir, env: podEnv });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('production.yaml: apikey_production:');
    expect(result.stderr).toContain('production.yaml: admin.users[0].password:');
  });
});
