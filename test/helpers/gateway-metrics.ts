import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { inject } from 'vitest';
import { registerWorkerMetrics } from '../../src/workers/cluster-metrics.js';
import { petsConfig, startTestGateway, type TestGateway } from './test-gateway.js';

// What a real gateway exports on /metrics, for the files that read it (the Grafana dashboard, the
// Prometheus alert rules) and for Prometheus' own linter, promtool.

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

/** The text the primary of `workers: N` adds to its workers' metrics: its workers' own families. */
export function primaryMetricsText(): Promise<string> {
  const primary = new Registry();
  registerWorkerMetrics(primary, () => 2);
  return primary.metrics();
}

/** The families of an exposition text. */
export const familiesOf = (text: string): Family[] =>
  [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => ({ name: name!, type: type! }));

/** Every family a gateway exports on /metrics, with those the primary of `workers: N` adds. */
export async function exportedFamilies(gateway: TestGateway): Promise<Family[]> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  return familiesOf(text + (await primaryMetricsText()));
}

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
