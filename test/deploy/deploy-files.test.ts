import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import YAML from 'yaml';
import { configSchema, type Config } from '../../src/config/schema.js';
import { hashPassword } from '../../src/kit/password-hash.js';
import { runCli, spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';

// The deployment files are checked against the code they deploy: ports, probe paths, environment
// variable names and stop timeouts come from the config schema and the source, and the configs they
// ship are started for real with `gateway start` (no Docker engine or cluster is needed for that).

const deployDir = path.resolve('deploy');
const readDeploy = (file: string) => readFileSync(path.join(deployDir, file), 'utf8');

/** `gateway start` reads ./conf when no --config-dir is given. */
const defaultConfigDir = 'conf';
/** The environment variables the code reads: the loader's overrides, LOG_LEVEL, NODE_ENV, … */
const codeEnvNames = sourceEnvNames();

function sourceEnvNames(): Set<string> {
  const names = new Set<string>();
  const visit = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) visit(file);
      else if (file.endsWith('.ts')) {
        for (const match of readFileSync(file, 'utf8').matchAll(/\benv(?:\.|\[')([A-Z][A-Z0-9_]*)/g))
          names.add(match[1]!);
      }
    }
  };
  visit(path.resolve('src'));
  return names;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    return entry.isDirectory() ? filesUnder(file) : [file];
  });
}

/** Every document of a YAML file; `<<` merge keys are resolved, as compose does. */
function yamlDocuments(file: string) {
  return YAML.parseAllDocuments(readFileSync(file, 'utf8'), { merge: true });
}

const yamlFiles = filesUnder(deployDir).filter((file) => /\.ya?ml$/.test(file));

// ---- Dockerfile ----

interface Instruction {
  keyword: string;
  args: string;
}

/** The Dockerfile's instructions, continuation lines joined, comments dropped. */
function dockerInstructions(text: string): Instruction[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [keyword = '', ...rest] = line.split(/\s+/);
      return { keyword: keyword.toUpperCase(), args: rest.join(' ') };
    });
}

const dockerfile = dockerInstructions(readDeploy('Dockerfile'));
const dockerArgs = Object.fromEntries(
  dockerfile
    .filter((instruction) => instruction.keyword === 'ARG')
    .map((instruction) => instruction.args.split('=') as [string, string]),
);
const stages = dockerfile.reduce<Instruction[][]>((all, instruction) => {
  if (instruction.keyword === 'FROM') all.push([]);
  all.at(-1)?.push(instruction);
  return all;
}, []);
const runtimeStage = stages.at(-1) ?? [];
const inRuntime = (keyword: string) => runtimeStage.filter((instruction) => instruction.keyword === keyword);
const imageWorkdir = inRuntime('WORKDIR').at(-1)?.args ?? '/';
/** Where the image's `gateway start` looks for its config: deployments mount theirs here. */
const imageConfigDir = path.posix.join(imageWorkdir, defaultConfigDir);
/** The exec-form array of a CMD or HEALTHCHECK … CMD instruction. */
const execForm = (args: string) => JSON.parse(args.slice(args.indexOf('['))) as string[];
const healthcheckCommand = execForm(inRuntime('HEALTHCHECK')[0]?.args ?? '[]');

// ---- compose ----

interface ComposeService {
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  stop_grace_period?: string;
  read_only?: boolean;
}
const compose = yamlDocuments(path.join(deployDir, 'compose.yaml'))[0]!.toJS() as {
  services: Record<string, ComposeService>;
};
/** The host folder a service mounts as the image's conf folder. */
const mountedConfDir = (service: ComposeService) =>
  service.volumes?.map((volume) => volume.split(':')).find(([, target]) => target === imageConfigDir)?.[0];
const composeGateways = Object.entries(compose.services).filter(([, service]) => mountedConfDir(service));
const composeConfFile = path.resolve(deployDir, mountedConfDir(composeGateways[0]![1])!, 'default.cjs');
const composeConfig: Config = configSchema.parse(createRequire(import.meta.url)(composeConfFile));
const composeConfEnvNames = new Set(
  [...readFileSync(composeConfFile, 'utf8').matchAll(/process\.env\.([A-Z][A-Z0-9_]*)/g)].map(
    (match) => match[1]!,
  ),
);

/** A compose environment with its `${NAME…}` references resolved from `dotenv`, as compose would. */
function interpolate(environment: Record<string, string>, dotenv: Record<string, string>) {
  return Object.fromEntries(
    Object.entries(environment).map(([name, value]) => [
      name,
      value.replace(/\$\{([A-Z][A-Z0-9_]*)[^}]*\}/g, (_match, variable: string) => dotenv[variable] ?? ''),
    ]),
  );
}

// ---- Kubernetes ----

interface Manifest {
  kind: string;
  metadata: { name: string };
  [key: string]: unknown;
}
interface Probe {
  httpGet: { path: string; port: string };
}
interface Container {
  env: Array<{ name: string; value?: string }>;
  ports: Array<{ name: string; containerPort: number }>;
  readinessProbe: Probe;
  livenessProbe: Probe;
  lifecycle: { preStop: { exec: { command: string[] } } };
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  securityContext: {
    allowPrivilegeEscalation: boolean;
    readOnlyRootFilesystem: boolean;
    capabilities: { drop: string[] };
  };
  volumeMounts: Array<{ name: string; mountPath: string; readOnly: boolean }>;
}
interface ProjectedSource {
  configMap?: { name: string; items: Array<{ key: string; path: string }> };
  secret?: { name: string; items: Array<{ key: string; path: string }> };
}
interface PodSpec {
  terminationGracePeriodSeconds: number;
  securityContext: { runAsNonRoot: boolean; runAsUser: number };
  containers: Container[];
  volumes: Array<{ name: string; projected: { sources: ProjectedSource[] } }>;
}

const kubernetesDir = path.join(deployDir, 'kubernetes');
const manifestFiles = readdirSync(kubernetesDir).filter((file) => file !== 'kustomization.yaml');
const manifests = manifestFiles.flatMap((file) =>
  yamlDocuments(path.join(kubernetesDir, file)).map((document) => document.toJS() as Manifest),
);
function manifest<T>(kind: string, name: string): Manifest & T {
  const found = manifests.find((candidate) => candidate.kind === kind && candidate.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in deploy/kubernetes`);
  return found as Manifest & T;
}

const deployment = manifest<{
  spec: {
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { annotations: Record<string, string> }; spec: PodSpec };
  };
}>('Deployment', 'quotagate');
const podSpec = deployment.spec.template.spec;
const gatewayContainer = podSpec.containers[0]!;
const containerPort = (name: string) =>
  gatewayContainer.ports.find((port) => port.name === name)?.containerPort;
const confSources = podSpec.volumes.find(
  (volume) =>
    volume.name === gatewayContainer.volumeMounts.find((mount) => mount.mountPath === imageConfigDir)?.name,
)!.projected.sources;
const configMapSource = confSources.find((source) => source.configMap)!.configMap!;
const secretSource = confSources.find((source) => source.secret)!.secret!;
const configMapData = manifest<{ data: Record<string, string> }>('ConfigMap', configMapSource.name).data;
const secretData = manifest<{ stringData: Record<string, string> }>('Secret', secretSource.name).stringData;
const podEnv = Object.fromEntries(gatewayContainer.env.map(({ name, value }) => [name, value ?? '']));
const configMapConfig: Config = configSchema.parse(YAML.parse(configMapData['default.yaml']!));
/** The file each projected key becomes in the pod's conf folder. */
const projectedFiles = (
  source: { items: Array<{ key: string; path: string }> },
  data: Record<string, string>,
) => Object.fromEntries(source.items.map((item) => [item.path, data[item.key]!]));

// ---- systemd ----

/** `Key=Value` lines of a unit file; a key given twice keeps every value. */
function unitEntries(text: string): Map<string, string[]> {
  const entries = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (match) entries.set(match[1]!, [...(entries.get(match[1]!) ?? []), match[2]!]);
  }
  return entries;
}

/** A systemd time span (`20`, `20s`, `1min 30s`, `500ms`) in milliseconds. */
function timeSpanMs(text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000 };
  return [...text.matchAll(/(\d+)\s*([a-z]*)/g)].reduce(
    (total, [, amount, unit]) => total + Number(amount) * units[unit || 's']!,
    0,
  );
}

const unit = unitEntries(readDeploy('systemd/quotagate.service'));
const unitValue = (key: string) => unit.get(key)?.at(-1);

// ---- running the shipped configs ----

const tempDirs: string[] = [];
const processes: CliProcess[] = [];
afterAll(async () => {
  for (const cli of processes) {
    if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGKILL');
    await cli.exited;
  }
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

/** A fresh folder holding `files`. */
function configDir(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-deploy-'));
  tempDirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}

/**
 * A config overlay that keeps the test's quota definitions under a prefix of their own, so that a Redis
 * given by REDIS_URL never sees writes under the real prefix.
 */
const isolatedPrefix = () => ({ store: { prefix: `test:${randomUUID()}:` } });

/** Starts `gateway start` in `dir` (its own working directory) and returns the ports it logged. */
async function startGateway(dir: string, env: NodeJS.ProcessEnv) {
  const cli = spawnCli(['start', '--config-dir', dir], { cwd: dir, env });
  processes.push(cli);
  const ports = await startedPorts(cli);
  return { cli, ports };
}

/** Runs the image's HEALTHCHECK command with node, as the container runtime would; resolves its exit code. */
function runHealthcheck(adminPort: number): Promise<number> {
  const [program, ...args] = healthcheckCommand;
  expect(program).toBe('node');
  return new Promise((resolve) => {
    execFile(process.execPath, args, { env: { ADMIN_PORT: String(adminPort) }, timeout: 5_000 }, (error) =>
      resolve(error ? Number(error.code ?? 1) : 0),
    );
  });
}

const newKey = () => randomBytes(32).toString('base64url');

describe('YAML files under deploy/', () => {
  it('parse without an error or a warning, and so do the configs embedded in them', () => {
    expect(yamlFiles.map((file) => path.relative(deployDir, file))).toEqual(
      expect.arrayContaining(['compose.yaml', 'kubernetes/deployment.yaml', 'kubernetes/configmap.yaml']),
    );
    const embedded = [configMapData['default.yaml']!, secretData['production.yaml']!];
    for (const text of [...yamlFiles.map((file) => readFileSync(file, 'utf8')), ...embedded]) {
      for (const document of YAML.parseAllDocuments(text, { merge: true })) {
        expect(document.errors).toEqual([]);
        expect(document.warnings).toEqual([]);
      }
    }
  });
});

describe('deploy/Dockerfile', () => {
  it('builds on Node 20 in two stages and installs only production dependencies in the runtime stage', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) {
      const image = stage[0]!.args.split(/\s+/)[0]!.replace(/\$\{(\w+)\}/g, (_match, name: string) => {
        return dockerArgs[name] ?? '';
      });
      expect(image).toMatch(/^node:20(?:[.-]|$)/);
    }
    expect(stages[0]!.some((instruction) => instruction.args.includes('npm run build'))).toBe(true);
    expect(inRuntime('RUN').some((instruction) => /npm ci\b.*--omit=dev/.test(instruction.args))).toBe(true);
    expect(inRuntime('COPY').some((instruction) => /--from=\w+ \/app\/dist /.test(instruction.args))).toBe(
      true,
    );
  });

  it('runs as a numeric non-root user, which Kubernetes can verify for runAsNonRoot', () => {
    const user = inRuntime('USER').at(-1)?.args ?? 'root';
    expect(user).toMatch(/^\d+(?::\d+)?$/);
    expect(Number(user.split(':')[0])).not.toBe(0);
    expect(podSpec.securityContext.runAsUser).toBe(Number(user.split(':')[0]));
  });

  it('starts node itself in exec form, so that SIGTERM reaches the gateway and not npm or a shell', () => {
    expect(inRuntime('ENTRYPOINT')).toEqual([]);
    expect(execForm(inRuntime('CMD').at(-1)!.args)).toEqual(['node', 'dist/cli.js', 'start']);
  });

  it("checks health with node's fetch on /healthz of the default admin port, overridable by ADMIN_PORT", () => {
    const instruction = inRuntime('HEALTHCHECK')[0]!.args;
    expect(instruction).toMatch(/\bCMD \[/);
    const script = healthcheckCommand.at(-1)!;
    expect(script).toContain('fetch(');
    expect(script).toContain('/healthz');
    expect(script).toContain('process.env.ADMIN_PORT');
    expect(codeEnvNames).toContain('ADMIN_PORT');
    expect(script).toContain(String(configSchema.parse({}).admin.port));
  });

  it('copies only files that exist and that its allow-list ignore file lets into the build context', () => {
    const ignoreLines = readDeploy('Dockerfile.dockerignore')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'));
    expect(ignoreLines[0]).toBe('*');
    const allowed = new Set(ignoreLines.filter((line) => line.startsWith('!')).map((line) => line.slice(1)));
    const sources = dockerfile
      .filter((instruction) => instruction.keyword === 'COPY' && !instruction.args.includes('--from='))
      .flatMap((instruction) => instruction.args.split(/\s+/).slice(0, -1));
    expect(sources.length).toBeGreaterThan(0);
    for (const source of sources) {
      expect(existsSync(source), source).toBe(true);
      expect(allowed.has(source) || allowed.has(`${source}/`), source).toBe(true);
    }
  });
});

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

describe('deploy/systemd/quotagate.service', () => {
  it('gives the gateway longer to stop after SIGTERM than the default shutdownTimeout', () => {
    expect(unitValue('KillSignal')).toBe('SIGTERM');
    expect(timeSpanMs(unitValue('TimeoutStopSec')!)).toBeGreaterThan(configSchema.parse({}).shutdownTimeout);
  });

  it('runs node on dist/cli.js start as its own user in production, restarting only on failure', () => {
    expect(unitValue('ExecStart')).toBe('/usr/bin/node dist/cli.js start');
    expect(unitValue('User')).toMatch(/^(?!root$)\w+/);
    expect(unit.get('Environment')).toContain('NODE_ENV=production');
    expect(unitValue('Restart')).toBe('on-failure');
  });

  it('reloads the config on systemctl reload with the SIGHUP the gateway reloads on', () => {
    expect(unitValue('ExecReload')).toBe('/bin/kill -HUP $MAINPID');
  });

  it("lets the gateway write only the memory store's folder", () => {
    expect(unitValue('NoNewPrivileges')).toBe('yes');
    expect(unitValue('ProtectSystem')).toBe('strict');
    const storeFolder = path.posix.dirname(configSchema.parse({}).store.file);
    expect(unit.get('ReadWritePaths')).toEqual([
      path.posix.join(unitValue('WorkingDirectory')!, storeFolder),
    ]);
  });
});

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
