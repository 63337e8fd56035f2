import { differenceOf, type Difference, type SideBySideRuns } from './side-by-side.js';
import { systemUsage } from './quotagate.js';
import type { Setups, Target } from './setups.js';

/**
 * The streamed rows (issue 34): what reading a `throttleunits` restriction's `body` costs on a streamed
 * answer, per event. An upstream answers every request as OpenAI's streamed chat completions do; bare
 * http-proxy-3 relays it as the reference, quotagate as shipped relays it with a header-only
 * throttleunits restriction (twice: the second copy is the control) and with the same restriction
 * reading `body` too.
 */
export const streamedNames = {
  bare: 'bare http-proxy-3, streamed chat completions (per event)',
  header: 'quotagate as shipped + throttleunits from a header, streamed (per event)',
  control: 'control: a second copy of the header-only streamed row',
  body: 'quotagate as shipped + throttleunits from the body too (usage.total_tokens), streamed (per event)',
} as const;

/** An event of a streamed answer is no request: every streamed row is compared with the bare proxy. */
export const streamedReference: Readonly<Record<string, string>> = Object.fromEntries(
  Object.values(streamedNames).map((name) => [name, streamedNames.bare]),
);

/** Each quotagate row and what it adds to: the body row's addition is the parsing's cost per event. */
export const streamedLayerBelow: Readonly<Record<string, string>> = {
  [streamedNames.header]: streamedNames.bare,
  [streamedNames.control]: streamedNames.header,
  [streamedNames.body]: streamedNames.header,
};

/**
 * The restriction of the quotagate rows: a throttleunits that never rejects, charging what the upstream's
 * `x-usage-tokens` header or trailer says. The bench's upstream sends neither, as OpenAI does not, so the
 * header row charges `default` and the body row what the usage chunk says.
 */
const tokenUnits = {
  api: '*',
  method: '*',
  type: 'throttleunits',
  config: { units: 999_999_999_999_999, per: 1, period: 'hour', header: 'x-usage-tokens', default: 1 },
};
export const bodyPath = 'usage.total_tokens';
/** The prompt tokens every answer's usage says; its completion tokens are its content deltas. */
const promptTokens = 37;
/** What each answer of `events` events says it cost: `usage.total_tokens` (bench/servers/chat-stream-upstream.ts). */
const tokensOf = (events: number) => promptTokens + events - 4;

/** Starts the upstream (answers of `events` events) and the four streamed rows; returns the rows. */
export async function startStreamedRows(setups: Setups, events: number): Promise<Target[]> {
  const upstream = await setups.node(
    'chat stream upstream',
    'chat-stream-upstream.js',
    [String(events)],
    false,
  );
  const origin = new URL(upstream.url).origin;
  const memory = { type: 'memory' };
  const asShipped = { quota: true, accessLog: true, protocol: 'event-stream' } as const;
  const quotagate = (name: string, dir: string, config: Record<string, unknown>) =>
    setups.quotagate(name, dir, origin, memory, { ...asShipped, restrictions: [{ ...tokenUnits, config }] });
  return [
    await setups.node(streamedNames.bare, 'bare-proxy.js', [origin], false, 'event-stream'),
    await quotagate(streamedNames.header, 'units-header', tokenUnits.config),
    await quotagate(streamedNames.control, 'units-control', tokenUnits.config),
    await quotagate(streamedNames.body, 'units-body', { ...tokenUnits.config, body: bodyPath }),
  ];
}

/** Exchanges whose units could not be read (charged `default`), over all restrictions of a gateway. */
async function unreadable(adminUrl: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  return [...text.matchAll(/^quotagate_units_unreadable_total\{[^}]*\} (\d+)$/gm)].reduce(
    (total, [, count]) => total + Number(count),
    0,
  );
}

/**
 * Throws unless each quotagate row charged as it should have, so that a row never measures something
 * else than it says: the header rows `default` (1) for every answer, all of them unreadable; the body row
 * what each answer's usage says, none unreadable.
 */
export async function checkStreamedCharges(rows: readonly Target[], events: number): Promise<void> {
  for (const row of rows) {
    if (!row.adminUrl) continue;
    const [used, missed] = [await systemUsage(row.adminUrl), await unreadable(row.adminUrl)];
    const tokens = tokensOf(events);
    const right =
      row.name === streamedNames.body
        ? used > 0 && used % tokens === 0 && missed === 0
        : used > 0 && used === missed;
    if (!right)
      throw new Error(
        `${row.name}: charged ${used} units, ${missed} answers unreadable (${tokens} tokens each)`,
      );
  }
}

/** What reading `body` adds per event to the header-only row, and what the control differs from it by. */
export interface StreamedCost {
  body: Difference;
  control: Difference;
}

export function streamedCost(runs: SideBySideRuns): StreamedCost {
  return {
    body: differenceOf(runs, streamedNames.body, streamedNames.header),
    control: differenceOf(runs, streamedNames.control, streamedNames.header),
  };
}

const differenceText = (difference: Difference) =>
  `${difference.medianUs.toFixed(2)} µs an event (median of the rounds' differences; rounds ${difference.lowestUs.toFixed(2)} to ${difference.highestUs.toFixed(2)}), ${difference.ratio.median.toFixed(3)}× its CPU`;

/** The paragraph under the table that says how the streamed rows were measured and what body costs. */
export function streamedText(cost: StreamedCost, events: number, connections: number): string {
  return `Streamed rows: answers of ${events} events (OpenAI chat completion chunks, the usage chunk, [DONE]), each row loaded by its own process keeping ${connections} answers streaming, each read to its end; CPU µs per event. Reading \`body\` (${bodyPath}) costs ${differenceText(cost.body)} over the header-only row; the control, a second copy of the header-only row, differs from it by ${differenceText(cost.control)}.`;
}
