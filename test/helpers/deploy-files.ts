import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, expect } from 'vitest';
import { DockerfileParser, JSONInstruction, ModifiableInstruction, type Instruction } from 'dockerfile-ast';
import YAML from 'yaml';
import { configSchema, type Config } from '../../src/config/schema.js';
import { filesUnder } from './files-under.js';
import { spawnCli, startedPorts, type CliProcess } from './run-cli.js';
import { useTempDirs } from './temp-dirs.js';

// The deployment files of deploy/, read as the tools that use them would: the Dockerfile's instructions,
// compose's YAML with merge keys, the Kubernetes manifests, the systemd unit. The deploy/ tests check them
// against the code they deploy: ports, probe paths, environment variable names and stop timeouts come from
// the config schema and the source, and the configs they ship are started for real with `gateway start`
// (no Docker engine or cluster is needed for that).

export const deployDir = path.resolve('deploy');
export const readDeploy = (file: string) => readFileSync(path.join(deployDir, file), 'utf8');

/** `gateway start` reads ./conf when no --config-dir is given. */
const defaultConfigDir = 'conf';
/** The environment variables the code reads: the loader's overrides, LOG_LEVEL, NODE_ENV, … */
export const codeEnvNames = sourceEnvNames();

function sourceEnvNames(): Set<string> {
  const names = new Set<string>();
  for (const file of filesUnder(path.resolve('src')).filter((each) => each.endsWith('.ts'))) {
    for (const match of readFileSync(file, 'utf8').matchAll(/\benv(?:\.|\[')([A-Z][A-Z0-9_]*)/g))
      names.add(match[1]!);
  }
  return names;
}

/** Every document of a YAML file; `<<` merge keys are resolved, as compose does. */
function yamlDocuments(file: string) {
  return YAML.parseAllDocuments(readFileSync(file, 'utf8'), { merge: true });
}

export const yamlFiles = filesUnder(deployDir).filter((file) => /\.ya?ml$/.test(file));

// ---- Dockerfile ----

/** One instruction of deploy/Dockerfile as BuildKit reads it (dockerfile-ast: continuations, flags, JSON form). */
export interface DockerInstruction {
  keyword: string;
  /** The arguments after the flags, continuation lines joined: a RUN's shell command. */
  args: string;
  /** `--from=build` → `{ from: 'build' }`; a flag without a value maps to null. */
  flags: Record<string, string | null>;
  /** The arguments one by one: the strings of the JSON (exec) form, else the words. */
  words: string[];
  /** Written in the JSON (exec) form. */
  execForm: boolean;
  node: Instruction;
}

function dockerInstruction(node: Instruction): DockerInstruction {
  const json = node instanceof JSONInstruction ? node.getJSONStrings() : [];
  const flags = node instanceof ModifiableInstruction ? node.getFlags() : [];
  return {
    keyword: node.getKeyword(),
    args: node.getArgumentsContent() ?? '',
    flags: Object.fromEntries(flags.map((flag) => [flag.getName(), flag.getValue()])),
    words:
      json.length > 0
        ? json.map((each) => each.getJSONValue())
        : node.getArguments().map((each) => each.getValue()),
    execForm: json.length > 0,
    node,
  };
}

export const dockerfile = DockerfileParser.parse(readDeploy('Dockerfile'))
  .getInstructions()
  .map(dockerInstruction);
export const dockerArgs = Object.fromEntries(
  dockerfile
    .filter((instruction) => instruction.keyword === 'ARG')
    .map((instruction) => instruction.args.split('=') as [string, string]),
);
export const stages = dockerfile.reduce<DockerInstruction[][]>((all, instruction) => {
  if (instruction.keyword === 'FROM') all.push([]);
  all.at(-1)?.push(instruction);
  return all;
}, []);
const runtimeStage = stages.at(-1) ?? [];
export const inRuntime = (keyword: string) =>
  runtimeStage.filter((instruction) => instruction.keyword === keyword);
const imageWorkdir = inRuntime('WORKDIR').at(-1)?.args ?? '/';
/** Where the image's `gateway start` looks for its config: deployments mount theirs here. */
export const imageConfigDir = path.posix.join(imageWorkdir, defaultConfigDir);
/** The exec-form array of a CMD or HEALTHCHECK … CMD instruction. */
export const execForm = (args: string) => JSON.parse(args.slice(args.indexOf('['))) as string[];
export const healthcheckCommand = execForm(inRuntime('HEALTHCHECK')[0]?.args ?? '[]');

// ---- compose ----

interface ComposeService {
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  stop_grace_period?: string;
  read_only?: boolean;
}
export const compose = yamlDocuments(path.join(deployDir, 'compose.yaml'))[0]!.toJS() as {
  services: Record<string, ComposeService>;
};
/** The host folder a service mounts as the image's conf folder. */
const mountedConfDir = (service: ComposeService) =>
  service.volumes?.map((volume) => volume.split(':')).find(([, target]) => target === imageConfigDir)?.[0];
export const composeGateways = Object.entries(compose.services).filter(([, service]) =>
  mountedConfDir(service),
);
export const composeConfFile = path.resolve(
  deployDir,
  mountedConfDir(composeGateways[0]![1])!,
  'default.cjs',
);
export const composeConfig: Config = configSchema.parse(createRequire(import.meta.url)(composeConfFile));
export const composeConfEnvNames = new Set(
  [...readFileSync(composeConfFile, 'utf8').matchAll(/process\.env\.([A-Z][A-Z0-9_]*)/g)].map(
    (match) => match[1]!,
  ),
);

/** A compose environment with its `${NAME…}` references resolved from `dotenv`, as compose would. */
export function interpolate(environment: Record<string, string>, dotenv: Record<string, string>) {
  return Object.fromEntries(
    Object.entries(environment).map(([name, value]) => [
      name,
      value.replace(/\$\{([A-Z][A-Z0-9_]*)[^}]*\}/g, (_match, variable: string) => dotenv[variable] ?? ''),
    ]),
  );
}

// ---- Kubernetes ----

export interface Manifest {
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

export const kubernetesDir = path.join(deployDir, 'kubernetes');
export const manifestFiles = readdirSync(kubernetesDir).filter((file) => file !== 'kustomization.yaml');
export const manifests = manifestFiles.flatMap((file) =>
  yamlDocuments(path.join(kubernetesDir, file)).map((document) => document.toJS() as Manifest),
);
export function manifest<T>(kind: string, name: string): Manifest & T {
  const found = manifests.find((candidate) => candidate.kind === kind && candidate.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in deploy/kubernetes`);
  return found as Manifest & T;
}

export const deployment = manifest<{
  spec: {
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { annotations: Record<string, string> }; spec: PodSpec };
  };
}>('Deployment', 'quotagate');
export const podSpec = deployment.spec.template.spec;
export const gatewayContainer = podSpec.containers[0]!;
export const containerPort = (name: string) =>
  gatewayContainer.ports.find((port) => port.name === name)?.containerPort;
const confSources = podSpec.volumes.find(
  (volume) =>
    volume.name === gatewayContainer.volumeMounts.find((mount) => mount.mountPath === imageConfigDir)?.name,
)!.projected.sources;
export const configMapSource = confSources.find((source) => source.configMap)!.configMap!;
export const secretSource = confSources.find((source) => source.secret)!.secret!;
export const configMapData = manifest<{ data: Record<string, string> }>(
  'ConfigMap',
  configMapSource.name,
).data;
export const secretData = manifest<{ stringData: Record<string, string> }>(
  'Secret',
  secretSource.name,
).stringData;
export const podEnv = Object.fromEntries(gatewayContainer.env.map(({ name, value }) => [name, value ?? '']));
export const configMapConfig: Config = configSchema.parse(YAML.parse(configMapData['default.yaml']!));
/** The file each projected key becomes in the pod's conf folder. */
export const projectedFiles = (
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
export function timeSpanMs(text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000 };
  return [...text.matchAll(/(\d+)\s*([a-z]*)/g)].reduce(
    (total, [, amount, unit]) => total + Number(amount) * units[unit || 's']!,
    0,
  );
}

export const unit = unitEntries(readDeploy('systemd/quotagate.service'));
export const unitValue = (key: string) => unit.get(key)?.at(-1);

/** Folders and `gateway start` processes of a suite, removed and killed after it. */
export function useDeployRuns() {
  // Registered first, so run last: vitest runs after-hooks newest first, and the folders outlive the processes.
  const tempDirs = useTempDirs('quotagate-deploy-');
  const processes: CliProcess[] = [];
  afterAll(async () => {
    for (const cli of processes) {
      if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGKILL');
      await cli.exited;
    }
  });
  return {
    /** A fresh folder holding `files`. */
    configDir(files: Record<string, string>): string {
      const dir = tempDirs.make();
      for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
      return dir;
    },
    /** Starts `gateway start` in `dir` (its own working directory) and returns the ports it logged. */
    async startGateway(dir: string, env: NodeJS.ProcessEnv) {
      const cli = spawnCli(['start', '--config-dir', dir], { cwd: dir, env });
      processes.push(cli);
      const ports = await startedPorts(cli);
      return { cli, ports };
    },
  };
}

/**
 * A config overlay that keeps the test's quota definitions under a prefix of their own, so that a Redis
 * given by REDIS_URL never sees writes under the real prefix.
 */
export const isolatedPrefix = () => ({ store: { prefix: `test:${randomUUID()}:` } });

/** Runs the image's HEALTHCHECK command with node, as the container runtime would; resolves its exit code. */
export function runHealthcheck(adminPort: number): Promise<number> {
  const [program, ...args] = healthcheckCommand;
  expect(program).toBe('node');
  return new Promise((resolve) => {
    execFile(process.execPath, args, { env: { ADMIN_PORT: String(adminPort) }, timeout: 5_000 }, (error) =>
      resolve(error ? Number(error.code ?? 1) : 0),
    );
  });
}

export const newKey = () => randomBytes(32).toString('base64url');
