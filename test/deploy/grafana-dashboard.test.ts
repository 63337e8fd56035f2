import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerWorkerMetrics } from '../../src/workers/cluster-metrics.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { petsConfig, startTestGateway } from '../helpers/test-gateway.js';

/**
 * deploy/grafana/quotagate-dashboard.json, checked against what a real gateway exports on /metrics (and
 * what the primary of `workers: N` adds): every query names a metric that exists, every metric of the
 * gateway's own has a panel, and the file imports as is (its data source is an input of the import).
 */
interface Target {
  expr: string;
  datasource: { uid: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: Target[];
}
interface Dashboard {
  __inputs: Array<{ name: string; type: string; pluginId: string }>;
  uid: string;
  panels: Panel[];
  templating: { list: Array<{ query: { query: string } }> };
}

const dashboard = JSON.parse(readFileSync('deploy/grafana/quotagate-dashboard.json', 'utf8')) as Dashboard;
const queries = [
  ...dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr)),
  ...dashboard.templating.list.map((variable) => variable.query.query),
];
const named = new Set(queries.flatMap((query) => query.match(/\bquotagate_[a-z0-9_]+\b/g) ?? []));

const defer = cleanupAfterEach();

/** The series names a gateway exports: a histogram's as its _bucket, _sum and _count. */
async function exportedNames(): Promise<{ names: Set<string>; ownFamilies: string[] }> {
  const gateway = await startTestGateway(petsConfig('http://127.0.0.1:9/pets'));
  defer(() => gateway.close());
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  const primary = new Registry();
  registerWorkerMetrics(primary, () => 2);
  const families = [
    ...[...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => ({ name: name!, type: type! })),
    ...(await primary.getMetricsAsJSON()).map((family) => ({ name: family.name, type: String(family.type) })),
  ];
  const names = new Set(
    families.flatMap(({ name, type }) =>
      type === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name],
    ),
  );
  // The gateway's own families, not prom-client's process and Node defaults.
  const ownFamilies = families
    .map(({ name }) => name)
    .filter((name) => !/^quotagate_(process|nodejs)_/.test(name));
  return { names, ownFamilies };
}

describe('the Grafana dashboard', () => {
  it('queries only metrics the gateway exports, and shows every metric of its own', async () => {
    const { names, ownFamilies } = await exportedNames();
    expect([...named].filter((name) => !names.has(name))).toEqual([]);
    const shown = (family: string) =>
      [...named].some((name) => name === family || name.startsWith(`${family}_`));
    expect(ownFamilies.filter((family) => !shown(family))).toEqual([]);
  });

  it('imports as is: one Prometheus input, every query on it, panels with unique ids inside 24 columns', () => {
    expect(dashboard.__inputs).toEqual([
      expect.objectContaining({ name: 'DS_PROMETHEUS', pluginId: 'prometheus' }),
    ]);
    const targets = dashboard.panels.flatMap((panel) => panel.targets ?? []);
    expect(targets.length).toBeGreaterThan(0);
    for (const target of targets) expect(target.datasource.uid).toBe('${DS_PROMETHEUS}');
    const ids = dashboard.panels.map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of dashboard.panels) {
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
      if (panel.type !== 'row') expect(panel.targets?.length ?? 0, panel.title).toBeGreaterThan(0);
    }
  });
});
