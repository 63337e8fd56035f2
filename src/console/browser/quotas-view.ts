import { countedText, limitText, modeBadge } from '../logic/restriction-text.js';
import type { QuotaAnswer } from '../logic/quota-form.js';
import { messageOf } from './api.js';
import { quotaRole, systemQuotaId, applicationDefaultQuotaId, type View } from './context.js';
import { badge, h, replace } from './dom.js';

const wellKnown = new Set([systemQuotaId, applicationDefaultQuotaId]);

/** The quotas: what each limits, in words; an administrator can open, add and delete them. */
export const quotasView: View = async (context, root) => {
  const [quotas, catalog] = await Promise.all([context.api.get<QuotaAnswer[]>('/quotas'), context.catalog()]);
  // The well-known quotas first (System, then Application Default: their ids sort so), then by name.
  const ordered = [...quotas].sort(
    (a, b) =>
      Number(wellKnown.has(b.id)) - Number(wellKnown.has(a.id)) ||
      (wellKnown.has(a.id) ? a.id.localeCompare(b.id) : a.name.localeCompare(b.name)),
  );

  const remove = async (quota: QuotaAnswer, button: HTMLButtonElement) => {
    if (quota.applicationCount) {
      context.notify(
        `"${quota.name}" is the plan of ${quota.applicationCount} application(s): take them off it first (Applications tab).`,
        'error',
      );
      return;
    }
    if (!confirm(`Delete the quota "${quota.name}"? Its restrictions stop applying at once.`)) return;
    button.disabled = true;
    try {
      const { etag } = await context.api.call('GET', `/quotas/${quota.id}`);
      await context.api.call('DELETE', `/quotas/${quota.id}`, { ifMatch: etag });
      context.notify(`Deleted "${quota.name}".`);
      context.reload();
    } catch (error) {
      button.disabled = false;
      context.notify(messageOf(error), 'error');
    }
  };

  const rows = ordered.map((quota) => {
    const restrictions =
      quota.restrictions.length === 0
        ? [h('li', { class: 'muted', text: 'No restrictions: nothing is limited.' })]
        : quota.restrictions.map((restriction) =>
            h(
              'li',
              {},
              h('strong', { text: limitText(restriction) }),
              ' on ',
              countedText(restriction, catalog),
              ' ',
              badge(modeBadge(restriction)),
            ),
          );
    const actions = h(
      'div',
      { class: 'actions' },
      h('a', {
        class: 'button',
        href: `#/quotas/${quota.id}`,
        text: context.isAdmin && !quota.declared ? 'Edit' : 'View',
      }),
      context.isAdmin && !wellKnown.has(quota.id) && !quota.declared
        ? h('button', {
            class: 'danger',
            type: 'button',
            text: 'Delete',
            'data-action': 'delete',
            onclick: (event: Event) => void remove(quota, event.currentTarget as HTMLButtonElement),
          })
        : null,
    );
    return h(
      'article',
      { class: 'card quota', 'data-quota': quota.id },
      h(
        'header',
        {},
        h('h3', { text: quota.name }),
        wellKnown.has(quota.id) ? h('span', { class: 'badge', text: 'well-known' }) : null,
        quota.declared
          ? h('span', { class: 'badge', text: 'conf/', title: 'Declared in conf/: read-only here' })
          : null,
        quota.applicationCount !== undefined
          ? h('span', {
              class: 'badge',
              'data-plan-members': String(quota.applicationCount),
              text: `plan · ${quota.applicationCount} on it`,
              title: 'A plan: applications are put on it from the Applications tab',
            })
          : null,
        actions,
      ),
      h('p', { class: 'muted', text: quota.description || quotaRole(quota) }),
      h('ul', { class: 'restrictions' }, restrictions),
    );
  });

  replace(
    root,
    h(
      'div',
      { class: 'toolbar' },
      h('h2', { text: 'Quotas' }),
      context.isAdmin ? h('a', { class: 'button primary', href: '#/quotas/new', text: 'New quota' }) : null,
    ),
    h('p', {
      class: 'lead',
      text: 'A quota is a set of restrictions: so many messages or megabytes per window, on every API or on one API or method. API quotas count all traffic together; application quotas count each application on its own. An application quota that no application owns is a plan: many applications can be put on it.',
    }),
    rows.length > 0
      ? rows
      : h('p', {
          class: 'empty',
          text: context.isAdmin
            ? 'No quotas yet. "New quota" adds one; until then only the well-known quotas apply.'
            : 'No quotas you may see yet. An API Administrator adds them.',
        }),
  );
};
