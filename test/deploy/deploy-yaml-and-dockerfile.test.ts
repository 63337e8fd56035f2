import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { configSchema } from '../../src/config/schema.js';
import {
  codeEnvNames,
  configMapData,
  deployDir,
  dockerArgs,
  dockerfile,
  execForm,
  healthcheckCommand,
  inRuntime,
  podSpec,
  readDeploy,
  secretData,
  stages,
  yamlFiles,
} from '../helpers/deploy-files.js';
import { checkoutFiles, contextFiles, filesOfCopy } from '../helpers/image-build.js';

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
    expect(
      inRuntime('COPY').some((instruction) => instruction.flags.from && instruction.words[0] === '/app/dist'),
    ).toBe(true);
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

  it('checks health with node on /healthz of the default admin port, overridable by ADMIN_PORT', () => {
    const instruction = inRuntime('HEALTHCHECK')[0]!.args;
    expect(instruction).toMatch(/\bCMD \[/);
    const script = healthcheckCommand.at(-1)!;
    expect(script).toContain('/healthz');
    expect(script).toContain('process.env.ADMIN_PORT');
    expect(codeEnvNames).toContain('ADMIN_PORT');
    expect(script).toContain(String(configSchema.parse({}).admin.port));
  });

  it('copies only files that its allow-list ignore file lets into the build context', async () => {
    const ignoreLines = readDeploy('Dockerfile.dockerignore')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'));
    expect(ignoreLines[0]).toBe('*');
    const context = contextFiles(await checkoutFiles());
    const copies = dockerfile.filter(
      (instruction) => instruction.keyword === 'COPY' && instruction.flags.from === undefined,
    );
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) expect(filesOfCopy(copy, '/', context).length, copy.args).toBeGreaterThan(0);
  });

  it("keeps a checkout's secrets, data and installed packages out of the build context", () => {
    const kept = [
      '.env',
      'conf/production.js',
      'conf/tls/key.pem',
      'data/quotas.json',
      'node_modules/x/a.js',
    ];
    expect(contextFiles(kept)).toEqual([]);
  });
});
