import { callersText, countedText, limitText, modeBadge } from '../logic/restriction-text.js';
import { busiestFirst } from '../logic/busiest-first.js';
import { nextRefreshMs, refreshMs } from '../logic/refresh.js';
import type { Catalog } from '../logic/catalog.js';
import type { UsageUnit } from '../logic/format.js';
import type { QuotaAnswer } from '../logic/quota-form.js';
import { messageOf } from './api.js';
import type { BarUsage, Sparkline, UsageBar } from './components.js';
import { pause, quotaRole, type Context, type View } from './context.js';
import { badge, h, replace } from './dom.js';

export interface RestrictionUsage {
  index: number;
  unit: UsageUnit;
  limit: number;
  windowSeconds: number;
  /** Only for a shadow restriction, whose rejections are those it would have made. */
  mode?: 'shadow';
  used?: number;
  resetSeconds?: number;
  /** Counted by caller (`by`): how many callers have units counted; `used` is the busiest one's count. */
  callers?: number;
  applications?: Array<{ application: string; name: string; used: number; resetSeconds: number }>;
  rejections: { bucketSeconds: number; counts: number[] };
}

export interface QuotaUsage {
  quota: string;
  restrictions: RestrictionUsage[];
}

export function usageBar(usage: BarUsage): UsageBar {
  const bar = document.createElement('qg-usage-bar') as UsageBar;
  bar.usage = usage;
  return bar;
}

export function sparkline(rejections: RestrictionUsage['rejections'], shadow: boolean): Sparkline {
  const line = document.createElement('qg-sparkline') as Sparkline;
  line.series = { ...rejections, shadow };
  return line;
}

/**
 * Calls `draw` now and then every few seconds (longer when a round takes long) until the returned stop
 * is called; a hidden tab is not polled. A failed round shows its message and the next one tries again.
 */
export function keepDrawing(context: Context, draw: () => Promise<void>): () => void {
  let stopped = false;
  void (async () => {
    while (!stopped) {
      const started = performance.now();
      try {
        await draw();
      } catch (error) {
        if (!stopped) context.notify(messageOf(error), 'error');
      }
      await pause(nextRefreshMs(performance.now() - started));
    }
  })();
  return () => {
    stopped = true;
  };
}

/** One quota's restrictions with their bars (one per application for application quotas) and sparklines. */
function quotaUsageCard(quota: QuotaAnswer, usage: QuotaUsage, catalog: Catalog): HTMLElement {
  const restrictions = usage.restrictions.map((restriction) => {
    const definition = quota.restrictions[restriction.index];
    const common = {
      unit: restriction.unit,
      limit: restriction.limit,
      windowSeconds: restriction.windowSeconds,
    };
    const bars = restriction.applications
      ? restriction.applications.length === 0
        ? [h('p', { class: 'empty', text: 'No application has used it in the current window.' })]
        : busiestFirst(restriction.applications).map((entry) =>
            'more' in entry
              ? h('p', { class: 'muted', text: `and ${entry.more} more applications with units counted` })
              : usageBar({
                  ...common,
                  used: entry.used,
                  resetSeconds: entry.resetSeconds,
                  label: entry.name,
                }),
          )
      : [
          usageBar({
            ...common,
            used: restriction.used ?? 0,
            resetSeconds: restriction.resetSeconds ?? 0,
            ...(restriction.callers === undefined ? {} : { label: callersText(restriction.callers) }),
          }),
        ];
    return h(
      'section',
      { class: 'restriction-usage', 'data-index': restriction.index },
      h(
        'header',
        {},
        h('strong', { text: definition ? limitText(definition) : `Restriction ${restriction.index + 1}` }),
        definition ? h('span', { class: 'muted', text: ` on ${countedText(definition, catalog)}` }) : null,
        definition ? badge(modeBadge(definition)) : null,
        sparkline(restriction.rejections, restriction.mode === 'shadow'),
      ),
      bars,
    );
  });
  return h(
    'article',
    { class: 'card usage', 'data-quota': quota.id },
    h('header', {}, h('h3', { text: quota.name }), h('span', { class: 'muted', text: quotaRole(quota) })),
    restrictions.length > 0
      ? restrictions
      : h('p', { class: 'empty', text: 'No restrictions: nothing is counted.' }),
  );
}

/** Every quota the user may see, with what each restriction has counted now; refreshes by itself. */
export const usageView: View = async (context, root) => {
  const catalog = await context.catalog();
  const list = h('div', { class: 'usage-list' });
  const stamp = h('span', { class: 'muted stamp' });
  replace(
    root,
    h('div', { class: 'toolbar' }, h('h2', { text: 'Live usage' }), stamp),
    h('p', {
      class: 'lead',
      text: `What each restriction has counted in its sliding window, against its limit; refreshed every ${refreshMs / 1000} s. Units leave a window as it slides: the oldest leave at the time shown. The red line is the requests each restriction rejected over the last five minutes.`,
    }),
    list,
  );
  return keepDrawing(context, async () => {
    const quotas = await context.api.get<QuotaAnswer[]>('/quotas');
    const usages = await Promise.all(
      quotas.map((quota) => context.api.get<QuotaUsage>(`/quotas/${quota.id}/usage`).catch(() => null)),
    );
    const cards = quotas.flatMap((quota, i) => {
      const usage = usages[i];
      return usage ? [quotaUsageCard(quota, usage, catalog)] : [];
    });
    replace(
      list,
      cards.length > 0
        ? cards
        : h('p', { class: 'empty', text: 'No quotas yet: there is nothing to count.' }),
    );
    stamp.textContent = `updated ${new Date().toLocaleTimeString()}`;
  });
};
