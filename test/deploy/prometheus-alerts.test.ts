import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import {
  alertRules,
  alertRulesFile as rulesFile,
  promtool,
  runPromtool,
} from '../helpers/gateway-metrics.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/**
 * deploy/prometheus/quotagate-alerts.yaml passes `promtool check rules`, and each alert fires on what it
 * says and stays quiet otherwise (`promtool test rules` on series written here). The promtool tests are
 * skipped where it is not installed (.ci/run installs Debian's `prometheus` package, which has it). That
 * every metric a rule reads is one `gateway start` exports is checked on its /metrics, in
 * test/observe/gateway-start-metrics.test.ts.
 */
const rules = alertRules();
const ruleNamed = (name: string) => rules.find((rule) => rule.alert === name)!;

const tempDirs = useTempDirs('quotagate-alerts-');

/** An alert, with series that fire it (at `firesAt`) and series that do not yet (at `quietAt`). */
interface AlertCase {
  alert: string;
  series: Record<string, string>;
  /** The labels of the alert that fires, besides the rule's own. */
  fires: Record<string, string>;
  firesAt: string;
  /** Earlier: not yet (a `for` not over, or the rise not there). */
  quietAt: string;
}

const gateway = (name: string, labels = '') => `${name}{job="quotagate",instance="gw-1:8081"${labels}}`;
const otherGateway = (name: string, labels = '') => `${name}{job="quotagate",instance="gw-2:8081"${labels}}`;
/** An alert on one gateway: `metric` goes `values` on gw-1 and stays `steady` on gw-2. */
const perInstance = (
  alert: string,
  metric: string,
  values: string,
  steady: string,
  quietAt: string,
  firesAt: string,
): AlertCase => ({
  alert,
  series: { [gateway(metric)]: values, [otherGateway(metric)]: steady },
  fires: { job: 'quotagate', instance: 'gw-1:8081' },
  quietAt,
  firesAt,
});
/** Restriction 0 of `quota` on gw-1, by decision: promtool's notation of values, one a minute. */
const decisions = (quota: string, values: { allowed?: string; rejected: string }) =>
  Object.fromEntries(
    Object.entries(values).map(([decision, series]) => [
      gateway('quotagate_quota_decisions_total', `,quota="${quota}",restriction="0",decision="${decision}"`),
      series,
    ]),
  );
const cases: AlertCase[] = [
  perInstance('QuotagateSharedCountersOff', 'quotagate_store_shared', '1 1 0 0 0', '1x4', '2m', '4m'),
  perInstance(
    'QuotagateReloadRefused',
    'quotagate_config_last_reload_successful',
    '1 1 0',
    '1x2',
    '1m',
    '2m',
  ),
  {
    // Two gateways answer 10 requests a second each with 200; from minute 10 one of them adds 2 a second
    // with 502: 9 % of the fleet's answers.
    alert: 'QuotagateServerErrors',
    series: {
      [gateway('quotagate_requests_total', ',api="Pet Store",method="getPet",status="200"')]: '0+600x25',
      [gateway('quotagate_requests_total', ',api="Pet Store",method="getPet",status="502"')]: '0x10 0+120x15',
      [otherGateway('quotagate_requests_total', ',api="Pet Store",method="getPet",status="200"')]: '0+600x25',
    },
    fires: { job: 'quotagate' },
    quietAt: '12m',
    firesAt: '25m',
  },
  {
    // A quota that rejected 1 request a minute for 2 hours, then 5 a second; another steady at 2 a second.
    alert: 'QuotagateRejectionsSpiking',
    series: {
      ...decisions('System', { allowed: '0+600x140', rejected: '0+1x120 120+300x20' }),
      ...decisions('Partners', { rejected: '0+120x140' }),
    },
    fires: { job: 'quotagate', quota: 'System' },
    quietAt: '120m',
    firesAt: '130m',
  },
  {
    // A quota that never rejected before: its baseline is 0, not missing, so the alert fires 5 minutes
    // after the rise rather than once the rise itself is in the baseline's window.
    alert: 'QuotagateRejectionsSpiking',
    series: decisions('New', { allowed: '0+600x20', rejected: '_x9 0+300x10' }),
    fires: { job: 'quotagate', quota: 'New' },
    quietAt: '14m',
    firesAt: '16m',
  },
  {
    // Target b of Pet Store fails its health checks on gw-1 from minute 2; target a, and gw-2, stay healthy.
    alert: 'QuotagateUpstreamTargetDown',
    series: {
      [gateway('quotagate_upstream_target_healthy', ',api="Pet Store",target="http://10.0.0.1:9000"')]: '1x6',
      [gateway('quotagate_upstream_target_healthy', ',api="Pet Store",target="http://10.0.0.2:9000"')]:
        '1 1 0 0 0 0 0',
      [otherGateway('quotagate_upstream_target_healthy', ',api="Pet Store",target="http://10.0.0.2:9000"')]:
        '1x6',
    },
    fires: { job: 'quotagate', instance: 'gw-1:8081', api: 'Pet Store', target: 'http://10.0.0.2:9000' },
    quietAt: '3m',
    firesAt: '4m',
  },
  perInstance(
    'QuotagateLogLinesDropped',
    'quotagate_log_lines_dropped_total',
    '0 0 0 40 40',
    '0x4',
    '2m',
    '3m',
  ),
];

/** An annotation as Prometheus renders it for an alert with `labels` (the rules use only $labels). */
function rendered(template: string, labels: Record<string, string>): string {
  const text = template.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_match, name: string) => labels[name] ?? '');
  if (text.includes('{{')) throw new Error(`a template this test cannot render: ${template}`);
  return text;
}

/** `cases` as a promtool unit-test file (Prometheus' docs: configuration/unit_testing_rules). */
function unitTests(): string {
  return YAML.stringify({
    rule_files: [rulesFile],
    evaluation_interval: '1m',
    tests: cases.map(({ alert, series, fires, firesAt, quietAt }) => {
      const rule = ruleNamed(alert);
      const labels = { ...rule.labels, ...fires };
      const annotations = Object.fromEntries(
        Object.entries(rule.annotations).map(([name, template]) => [name, rendered(template, labels)]),
      );
      return {
        interval: '1m',
        input_series: Object.entries(series).map(([name, values]) => ({ series: name, values })),
        alert_rule_test: [
          { eval_time: quietAt, alertname: alert, exp_alerts: [] },
          {
            eval_time: firesAt,
            alertname: alert,
            exp_alerts: [{ exp_labels: labels, exp_annotations: annotations }],
          },
        ],
      };
    }),
  });
}

describe('the Prometheus alert rules', () => {
  it('alert on the store, reloads, 5xx, rejections, dropped log lines and upstream targets down, each with a severity', () => {
    expect(new Set(cases.map((each) => each.alert))).toEqual(new Set(rules.map((rule) => rule.alert)));
    for (const rule of rules) expect(['critical', 'warning'], rule.alert).toContain(rule.labels.severity);
  });

  it.skipIf(!promtool)('pass promtool check rules', async () => {
    const result = await runPromtool(['check', 'rules', rulesFile]);
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  it.skipIf(!promtool)('fire on what they say and stay quiet before it (promtool test rules)', async () => {
    const file = path.join(tempDirs.make(), 'quotagate-alerts.test.yaml');
    writeFileSync(file, unitTests());
    const result = await runPromtool(['test', 'rules', file]);
    expect(result.output).toContain('SUCCESS');
    expect(result.exitCode, result.output).toBe(0);
  });
});
