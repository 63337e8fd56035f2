import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  exportedFamilies,
  metricsIn,
  ownFamilies,
  seriesNames,
  startMetricsGateway,
} from '../helpers/gateway-metrics.js';

/**
 * deploy/grafana/quotagate-dashboard.json, checked against what a real gateway on Redis exports on
 * /metrics (and what the primary of `workers: N` adds): every query names a metric that exists, every
 * metric of the gateway's own has a panel, and the file imports as is (its data source is an input of
 * the import).
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
const named = new Set(queries.flatMap(metricsIn));

const defer = cleanupAfterEach();

describe('the Grafana dashboard', () => {
  it('queries only metrics the gateway exports, and shows every metric of its own', async () => {
    const gateway = await startMetricsGateway();
    defer(() => gateway.close());
    const families = await exportedFamilies(gateway);
    const names = seriesNames(families);
    expect([...named].filter((name) => !names.has(name))).toEqual([]);
    const shown = (family: string) =>
      [...named].some((name) => name === family || name.startsWith(`${family}_`));
    expect(ownFamilies(families).filter((family) => !shown(family))).toEqual([]);
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
