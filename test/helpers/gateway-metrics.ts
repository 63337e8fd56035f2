import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { inject } from 'vitest';
import YAML from 'yaml';
import { petsConfig, startTestGateway, type TestGateway } from './test-gateway.js';

// What a gateway exports on /metrics, read as Prometheus reads it; the files that read it (its list in
// docs/logging.md, the Grafana dashboard, the Prometheus alert rules); and Prometheus' own linter, promtool.

/** A metric family as the exposition text declares it (`# TYPE name type`). */
export interface Family {
  name: string;
  type: string;
}

/**
 * A gateway on the suite's Redis, the store that exports every metric (the shared counters, the
 * fleet's heartbeat), in front of an upstream that never answers (127.0.0.1:9). Its own prefix keeps
 * the suite's Redis free of its keys.
 */
export function startMetricsGateway(extra: Record<string, unknown> = {}): Promise<TestGateway> {
  return startTestGateway(
    petsConfig('http://127.0.0.1:9/pets', {
      store: { type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` },
      ...extra,
    }),
  );
}

/** The families of an exposition text. */
export const familiesOf = (text: string): Family[] =>
  [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => ({ name: name!, type: type! }));

/** One sample of an exposition text: its series name, its labels, its value. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of an exposition text (label values with no quote or comma in them, as the gateway's are). */
export const samplesOf = (text: string): Sample[] =>
  [...text.matchAll(/^([a-z_:][a-z0-9_:]*)(?:\{([^}]*)\})? (\S+)$/gm)].map(([, name, labels, value]) => ({
    name: name!,
    labels: Object.fromEntries(
      [...(labels ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map(([, key, labelValue]) => [key!, labelValue!]),
    ),
    value: Number(value),
  }));

/** The sum of the samples of `name` whose labels include `labels`. */
export const sumOf = (text: string, name: string, labels: Record<string, string> = {}): number =>
  samplesOf(text)
    .filter(
      (sample) =>
        sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
    )
    .reduce((sum, sample) => sum + sample.value, 0);

/**
 * `text` with a zero sample after each family that has none yet (a counter by label that nothing has
 * counted), in the form of its type: promtool reads only the families that have a sample.
 */
export function withEverySampled(text: string): string {
  return text.replace(/^# TYPE (\S+) (\S+)$/gm, (declaration, name: string, type: string) => {
    if (new RegExp(`^${name}(?:_bucket|_sum|_count)?[{ ]`, 'm').test(text)) return declaration;
    const samples: Record<string, string[]> = {
      histogram: [`${name}_bucket{le="+Inf"} 0`, `${name}_sum 0`, `${name}_count 0`],
      summary: [`${name}_sum 0`, `${name}_count 0`],
    };
    return [declaration, ...(samples[type] ?? [`${name} 0`])].join('\n');
  });
}

/**
 * The families docs/logging.md lists in its Metrics section, with their type; a name ending in `*` is a
 * prefix (prom-client's process and Node.js families), with no type.
 */
export function documentedFamilies(): Family[] {
  const page = readFileSync('docs/logging.md', 'utf8');
  const section = /^## Metrics\n([\s\S]*?)(?=^## )/m.exec(page)?.[1] ?? '';
  return [...section.matchAll(/^\| `(quotagate_[a-z0-9_]+\*?)` +\| *([a-z]*) *\|/gm)].map(
    ([, name, type]) => ({ name: name!, type: type! }),
  );
}

/** The PromQL expressions of the shipped Grafana dashboard: its panels' queries and its variables'. */
export function dashboardQueries(): string[] {
  const dashboard = JSON.parse(readFileSync('deploy/grafana/quotagate-dashboard.json', 'utf8')) as {
    panels: Array<{ targets?: Array<{ expr: string }> }>;
    templating: { list: Array<{ query: { query: string } }> };
  };
  return [
    ...dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr)),
    ...dashboard.templating.list.map((variable) => variable.query.query),
  ];
}

/** A rule of the shipped Prometheus alert rules. */
export interface AlertRule {
  alert: string;
  expr: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export const alertRulesFile = path.resolve('deploy/prometheus/quotagate-alerts.yaml');

/** The shipped Prometheus alert rules, every group's. */
export const alertRules = (): AlertRule[] =>
  (
    YAML.parse(readFileSync(alertRulesFile, 'utf8')) as { groups: Array<{ rules: AlertRule[] }> }
  ).groups.flatMap((group) => group.rules);

/** The series names of `families` a query can name: a histogram's as its _bucket, _sum and _count. */
export const seriesNames = (families: Family[]) =>
  new Set(
    families.flatMap(({ name, type }) =>
      type === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name],
    ),
  );

/** The gateway's own families, not prom-client's process and Node defaults. */
export const ownFamilies = (families: Family[]) =>
  families.map(({ name }) => name).filter((name) => !/^quotagate_(process|nodejs)_/.test(name));

/** The quotagate metrics a PromQL expression reads. */
export const metricsIn = (expression: string) => expression.match(/\bquotagate_[a-z0-9_]+\b/g) ?? [];

/** Prometheus' promtool (Debian's `prometheus` package), or undefined where it is not installed. */
export const promtool = (() => {
  try {
    return execFileSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
})();

/** Runs promtool with `args` (and `input` on its stdin); resolves its exit code and everything it printed. */
export function runPromtool(args: string[], input = ''): Promise<{ exitCode: number; output: string }> {
  return new Promise((resolve) => {
    const child = execFile(promtool!, args, { timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ exitCode: error ? Number(error.code ?? 1) : 0, output: `${stdout}${stderr}` });
    });
    child.stdin?.end(input);
  });
}
