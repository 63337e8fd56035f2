import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * deploy/grafana/quotagate-dashboard.json imports as is (its data source is an input of the import).
 * Its queries are checked against the /metrics of `gateway start` in test/observe/gateway-start-metrics.test.ts:
 * every query names a metric that exists, every metric of the gateway's own has a panel.
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

describe('the Grafana dashboard', () => {
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
