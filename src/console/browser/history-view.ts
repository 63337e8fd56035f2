import type uPlot from '../vendor/uPlot.esm.js';
import { apiName } from '../logic/catalog.js';
import type { QuotaAnswer } from '../logic/quota-form.js';
import {
  dailyLimit,
  dailySeries,
  lastDays,
  type DailyLimit,
  type DailySeries,
  type UsageRowAnswer,
} from '../logic/usage-series.js';
import { messageOf } from './api.js';
import type { Application, Context, View } from './context.js';
import { h, replace, select } from './dom.js';

/** What the view opens on: the last 30 days, in UTC. */
const defaultDays = 30;

const colours = { admitted: '#2e9d5b', refused: '#c93434', limit: '#5d6678' };

interface Range {
  from: string;
  to: string;
  /** The catalog's id of the one API shown, or undefined for every API. */
  api?: string;
}

/**
 * The rows of the range: every application's at once for an administrator; a member may read each
 * application's own only, so those are asked one by one.
 */
async function rowsOf(
  context: Context,
  range: Range,
  applications: Application[],
): Promise<UsageRowAnswer[]> {
  const query = `from=${range.from}&to=${range.to}`;
  if (context.isAdmin) {
    const api = range.api === undefined ? '' : `&api=${encodeURIComponent(range.api)}`;
    return context.api.get<UsageRowAnswer[]>(`/usage/history?${query}${api}`);
  }
  const each = await Promise.all(
    applications.map((application) =>
      context.api.get<UsageRowAnswer[]>(
        `/applications/${encodeURIComponent(application.id)}/usage/history?${query}`,
      ),
    ),
  );
  return each.flat();
}

/** Midnight UTC of each day, in seconds, as uPlot's x values; its axis is drawn in UTC too. */
const secondsOf = (day: string): number => Date.parse(`${day}T00:00:00Z`) / 1000;

const daySeconds = 86_400;

/** Two bars a day side by side (admitted left of the day's mark, refused right), a dashed limit line. */
function chartOptions(Plot: typeof uPlot, limit: string | null): uPlot.Options {
  const bars = (align: -1 | 1) => Plot.paths.bars!({ size: [0.4, 32], align });
  return {
    width: 860,
    height: 240,
    tzDate: (seconds) => Plot.tzDate(new Date(seconds * 1000), 'Etc/UTC'),
    scales: {
      // Half a day either side, so the first and the last day's bars are whole.
      x: { time: true, range: (_chart, min, max) => [min - daySeconds / 2, max + daySeconds / 2] },
      y: { range: (_chart, _min, max) => [0, Math.max(1, max)] },
    },
    axes: [
      {
        incrs: [1, 2, 7, 14, 28, 91].map((days) => days * daySeconds),
        values: (_chart, splits) =>
          splits.map((seconds) => new Date(seconds * 1000).toISOString().slice(5, 10)),
      },
      // Calls are whole: no tick between two counts.
      {
        incrs: [1, 2, 5]
          .flatMap((step) => [1, 10, 100, 1000, 10_000, 100_000, 1e6, 1e7].map((ten) => step * ten))
          .sort((a, b) => a - b),
      },
    ],
    series: [
      // A day of the history's calendar (usageHistory.timeZone), drawn at that date's UTC midnight.
      { label: 'Day', value: '{YYYY}-{MM}-{DD}' },
      {
        label: 'Admitted',
        stroke: colours.admitted,
        fill: colours.admitted,
        paths: bars(-1),
        points: { show: false },
      },
      {
        label: 'Refused',
        stroke: colours.refused,
        fill: colours.refused,
        paths: bars(1),
        points: { show: false },
      },
      ...(limit === null
        ? []
        : [{ label: `Limit: ${limit}`, stroke: colours.limit, dash: [6, 4], points: { show: false } }]),
    ],
  };
}

/** The chart of one application, and a table of the same numbers under it (for screen readers too). */
function historyCard(
  Plot: typeof uPlot,
  name: string,
  series: DailySeries,
  limit: DailyLimit | null,
  charts: uPlot[],
): HTMLElement {
  const drawn = limit?.drawn ?? null;
  const plot = h('div', { class: 'history-chart' });
  const rows = series.days.map((day, i) =>
    h(
      'tr',
      { 'data-date': day },
      h('th', { scope: 'row', text: day }),
      h('td', { class: 'admitted', text: series.admitted[i]! }),
      h('td', { class: 'refused', text: series.refused[i]! }),
    ),
  );
  const card = h(
    'article',
    {
      class: 'card history',
      'data-application': series.application ?? '',
      ...(drawn ? { 'data-limit': drawn.messages } : {}),
    },
    h('header', {}, h('h3', { text: name })),
    plot,
    h(
      'p',
      { class: 'muted limit-caption' },
      drawn
        ? `The dashed line is the daily limit of its quota: ${drawn.text}.`
        : limit
          ? 'No limit of one day on every call shown: no line is drawn.'
          : 'Not counted under an application quota: no line is drawn.',
    ),
    limit && limit.stated.length > 0
      ? h(
          'ul',
          { class: 'muted limits-stated' },
          limit.stated.map((text) => h('li', { text })),
        )
      : null,
    h(
      'details',
      {},
      h('summary', { text: 'The numbers' }),
      h(
        'table',
        { class: 'history-table' },
        h('caption', { text: `Calls of ${name} per day` }),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col', text: 'Day' }),
            h('th', { scope: 'col', text: 'Admitted' }),
            h('th', { scope: 'col', text: 'Refused' }),
          ),
        ),
        h('tbody', {}, rows),
      ),
    ),
  );
  const data: uPlot.AlignedData = [
    series.days.map(secondsOf),
    series.admitted,
    series.refused,
    ...(drawn ? [series.days.map(() => drawn.messages)] : []),
  ];
  charts.push(new Plot(chartOptions(Plot, drawn?.text ?? null), data, plot));
  return card;
}

/**
 * Each application's calls per day over a range of days: admitted and refused, with the daily limit of
 * the quota that counts it as a line (docs/quotas.md, "Usage history").
 */
export const historyView: View = async (context, root) => {
  // uPlot is loaded by the one view that draws with it: the console's other tabs do without its 145 kB.
  const [catalog, applications, { default: Plot }] = await Promise.all([
    context.catalog(),
    context.api.get<Application[]>('/applications'),
    import('../vendor/uPlot.esm.js'),
  ]);
  const quotas = new Map<string, QuotaAnswer>();
  const quotaOf = async (application: Application): Promise<QuotaAnswer> => {
    let quota = quotas.get(application.id);
    if (!quota) {
      quota = await context.api.get<QuotaAnswer>(`/applications/${encodeURIComponent(application.id)}/quota`);
      quotas.set(application.id, quota);
    }
    return quota;
  };
  const range = lastDays(Date.now(), defaultDays);
  const from = h('input', {
    type: 'date',
    name: 'from',
    value: range.from,
    required: true,
  }) as HTMLInputElement;
  const to = h('input', { type: 'date', name: 'to', value: range.to, required: true }) as HTMLInputElement;
  const api = select(
    [['', 'Every API'], ...catalog.apis.map((entry) => [entry.id, entry.name] as const)],
    '',
    {
      name: 'api',
    },
  );
  const list = h('div', { class: 'history-list' });
  let charts: uPlot[] = [];
  const clear = () => {
    for (const chart of charts) chart.destroy();
    charts = [];
  };

  const draw = async () => {
    const shown: Range = { from: from.value, to: to.value, ...(api.value ? { api: api.value } : {}) };
    replace(list, h('p', { class: 'muted', text: 'Loading…' }));
    const rows = await rowsOf(context, shown, applications);
    const series = dailySeries(rows, shown, shown.api);
    const limits = await Promise.all(
      series.map(async (entry) => {
        const application = applications.find(
          (candidate) => candidate.id.toLowerCase() === entry.application?.toLowerCase(),
        );
        return application
          ? { name: application.name, limit: dailyLimit(await quotaOf(application), catalog, shown.api) }
          : { name: entry.application ?? 'Public APIs (no application)', limit: null };
      }),
    );
    clear();
    const scope = shown.api === undefined ? 'every API' : apiName(catalog, shown.api);
    replace(
      list,
      series.length === 0
        ? h('p', { class: 'empty', text: `No calls counted from ${shown.from} to ${shown.to} on ${scope}.` })
        : series.map((entry, i) => historyCard(Plot, limits[i]!.name, entry, limits[i]!.limit, charts)),
    );
  };

  const show = async (event?: Event) => {
    event?.preventDefault();
    try {
      await draw();
    } catch (error) {
      clear();
      replace(list, h('p', { class: 'error', role: 'alert', text: messageOf(error) }));
    }
  };

  replace(
    root,
    h('div', { class: 'toolbar' }, h('h2', { text: 'History' })),
    h('p', {
      class: 'lead',
      text: 'The calls of each application per day, as the usage history counts them: admitted (forwarded upstream) and refused (429). Days are those of usageHistory.timeZone (UTC unless the config says another). The dashed line is the daily limit of the quota that counts the application, when it has one of a day on every call shown; other limits are stated under the chart.',
    }),
    h(
      'form',
      { class: 'history-range', onsubmit: (event: Event) => void show(event) },
      h('label', { class: 'field' }, h('span', { text: 'From' }), from),
      h('label', { class: 'field' }, h('span', { text: 'To' }), to),
      h('label', { class: 'field' }, h('span', { text: 'API' }), api),
      h('button', { type: 'submit', class: 'primary', text: 'Show' }),
    ),
    list,
  );
  await show();
  return clear;
};
