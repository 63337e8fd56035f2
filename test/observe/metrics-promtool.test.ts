import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  familiesOf,
  primaryMetricsText,
  promtool,
  runPromtool,
  startMetricsGateway,
} from '../helpers/gateway-metrics.js';
import { basicAuth, devKey, setQuota, systemQuotaId, throttle } from '../helpers/test-gateway.js';

/**
 * The names on /metrics keep Prometheus' conventions as its own linter reads them (`promtool check
 * metrics`): no type in a name, `_total` on counters only, units spelt out. Skipped where promtool is
 * not installed (.ci/run installs Debian's `prometheus` package, which has it).
 */
const defer = cleanupAfterEach();

/**
 * `text` with a zero sample after each family that has none yet (a counter by label that nothing has
 * counted), in the form of its type: promtool reads only the families that have a sample.
 */
function withEverySampled(text: string): string {
  return text.replace(/^# TYPE (\S+) (\S+)$/gm, (declaration, name: string, type: string) => {
    if (new RegExp(`^${name}(?:_bucket|_sum|_count)?[{ ]`, 'm').test(text)) return declaration;
    const samples: Record<string, string[]> = {
      histogram: [`${name}_bucket{le="+Inf"} 0`, `${name}_sum 0`, `${name}_count 0`],
      summary: [`${name}_sum 0`, `${name}_count 0`],
    };
    return [declaration, ...(samples[type] ?? [`${name} 0`])].join('\n');
  });
}

describe.skipIf(!promtool)('the metrics of a live gateway', () => {
  it('pass promtool check metrics, every family of them', async () => {
    const gateway = await startMetricsGateway();
    defer(() => gateway.close());
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(100, 1, 'minute')] },
      systemQuotaId,
    );
    // An answered request (the upstream never answers: 502), a quota decision, an upstream error, a reload.
    const answer = await fetch(`${gateway.url}/pets/1`, { headers: { authorization: basicAuth(devKey) } });
    expect(answer.status).toBe(502);
    expect((await gateway.running.reload()).applied).toBe(true);
    const text = (await (await fetch(`${gateway.adminUrl}/metrics`)).text()) + (await primaryMetricsText());
    expect(familiesOf(text).length).toBeGreaterThan(0);
    expect(await runPromtool(['check', 'metrics'], withEverySampled(text))).toEqual({
      exitCode: 0,
      output: '',
    });
  });
});
