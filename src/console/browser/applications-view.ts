import { limitText, modeBadge, scopeText } from '../logic/restriction-text.js';
import type { QuotaAnswer } from '../logic/quota-form.js';
import { ApiError, messageOf } from './api.js';
import { applicationDefaultQuotaId, type Application, type View } from './context.js';
import { badge, h, replace, select } from './dom.js';
import { keepDrawing, usageBar, type QuotaUsage } from './usage-view.js';

const quotaPath = (application: Application) => `/applications/${encodeURIComponent(application.id)}/quota`;

/**
 * The applications (those of conf/ and those made through the API), each with the quota that applies
 * to it (its own, the plan it is on, or the Application Default) and what it has used of each
 * restriction.
 */
export const applicationsView: View = async (context, root) => {
  const catalog = await context.catalog();
  const list = h('div', { class: 'application-list' });
  replace(
    root,
    h('div', { class: 'toolbar' }, h('h2', { text: 'Applications' })),
    h('p', {
      class: 'lead',
      text: 'Each application is counted under its own quota when it has one, else under the plan it is on, else under the Application Default. Applications come from conf/ (read-only here), from the portal API (POST /api/portal/v1.3/applications), or, with ldap, jwt and plugin, are the callers the gateway knows: those with a quota of their own or on a plan, and those counted now.',
    }),
    list,
  );
  const applications = await context.api.get<Application[]>('/applications');
  if (applications.length === 0) {
    replace(
      list,
      h('p', {
        class: 'empty',
        text: 'No applications yet. With APIKeyAuthType basic or apikey, conf/ lists them under "applications". With ldap, jwt or plugin, the applications are the callers: a directory user, the value of a token\'s jwt.applicationClaim, the caller a plugin names. One shows here once it has a quota of its own or is on a plan (PUT /api/portal/v1.3/applications/{id}/quota gives it one before its first request), or once the Application Default or a plan counts it. Any scheme can have applications made through the portal API.',
      }),
    );
    return;
  }
  // Each application's quota, with the entity tag a change sends back in If-Match; and the plans.
  const quotaOf = new Map<string, QuotaAnswer>();
  const etagOf = new Map<string, string>();
  const [quotas] = await Promise.all([
    context.api.get<QuotaAnswer[]>('/quotas'),
    ...applications.map(async (application) => {
      const { data, etag } = await context.api.call<QuotaAnswer>('GET', quotaPath(application));
      quotaOf.set(application.id, data);
      etagOf.set(application.id, etag);
    }),
  ]);
  const plans = quotas.filter((quota) => quota.applicationCount !== undefined);

  /** Puts the application on a plan: one write, from its own quota or another plan too. */
  const putOnPlan = async (application: Application, plan: QuotaAnswer, control: HTMLSelectElement) => {
    control.disabled = true;
    const current = quotaOf.get(application.id)!;
    const hasRecord = current.id !== applicationDefaultQuotaId;
    try {
      const { data } = await context.api.call<{ warnings?: string[] }>('PUT', quotaPath(application), {
        body: { plan: plan.id },
        ...(hasRecord ? { ifMatch: etagOf.get(application.id) ?? '' } : {}),
      });
      // Off the Application Default: what of it the plan lacks no longer counts the application.
      const lost = data.warnings ?? [];
      context.notify(
        [
          `"${application.name}" is on the plan "${plan.name}".`,
          ...lost.map((warning) => `Note: ${warning}.`),
        ].join(' '),
        lost.length > 0 ? 'error' : 'done',
      );
      context.reload();
    } catch (error) {
      control.disabled = false;
      context.notify(messageOf(error), 'error');
    }
  };

  const planChoice = (application: Application, quota: QuotaAnswer) =>
    context.isAdmin && plans.length > 0
      ? select(
          [
            ['', quota.plan ? 'Move it to another plan…' : 'Put it on a plan…'],
            ...plans
              .filter((plan) => plan.id !== quota.plan?.id)
              .map((plan) => [plan.id, plan.name] as const),
          ],
          '',
          {
            'data-action': 'plan',
            'aria-label': `Plan of ${application.name}`,
            onchange: (event: Event) => {
              const control = event.currentTarget as HTMLSelectElement;
              const plan = plans.find((candidate) => candidate.id === control.value);
              if (plan) void putOnPlan(application, plan, control);
            },
          },
        )
      : null;

  /** Gives the application a quota of its own, a copy of the Application Default, and opens it. */
  const giveOwn = async (application: Application, button: HTMLButtonElement) => {
    button.disabled = true;
    try {
      const { restrictions } = quotaOf.get(application.id)!;
      const { data } = await context.api.call<QuotaAnswer>('POST', quotaPath(application), {
        body: { restrictions },
      });
      context.notify(`"${application.name}" has a quota of its own: change it here.`);
      location.hash = `#/quotas/${data.id}`;
    } catch (error) {
      button.disabled = false;
      context.notify(messageOf(error), 'error');
    }
  };

  /** Deletes the application's own quota, or takes it off its plan: the Application Default applies again. */
  const backToDefault = async (application: Application, button: HTMLButtonElement) => {
    const { plan } = quotaOf.get(application.id)!;
    const question = plan
      ? `Take "${application.name}" off the plan "${plan.name}"? The Application Default applies to it then.`
      : `Delete the own quota of "${application.name}"? The Application Default applies to it then.`;
    if (!confirm(question)) return;
    button.disabled = true;
    try {
      await context.api.call('DELETE', quotaPath(application), { ifMatch: etagOf.get(application.id) ?? '' });
      context.notify(`"${application.name}" is on the Application Default again.`);
      context.reload();
    } catch (error) {
      button.disabled = false;
      const message =
        error instanceof ApiError && error.status === 412
          ? 'Someone changed this quota after the page was opened: nothing was deleted. Look at it again first.'
          : error instanceof Error
            ? error.message
            : String(error);
      context.notify(message, 'error');
    }
  };

  /** Sets to zero every counter that counts the application now, once the administrator confirms it. */
  const resetQuota = async (application: Application, button: HTMLButtonElement) => {
    const quota = quotaOf.get(application.id)!;
    const question = `Reset the quota of "${application.name}"? Every counter of "${quota.name}" that counts it starts again from zero, on every gateway: its next request has the whole limit.`;
    if (!confirm(question)) return;
    button.disabled = true;
    try {
      const { status } = await context.api.call('POST', `${quotaPath(application)}/reset`);
      context.notify(
        `The quota of "${application.name}" was reset (${status}): it has its whole limit again.`,
      );
      context.reload();
    } catch (error) {
      button.disabled = false;
      context.notify(messageOf(error), 'error');
    }
  };

  const resetAction = (application: Application) =>
    context.isAdmin
      ? h('button', {
          type: 'button',
          class: 'link',
          'data-action': 'reset-quota',
          text: 'Reset quota',
          title: 'Set to zero every counter that counts this application now',
          onclick: (event: Event) => void resetQuota(application, event.currentTarget as HTMLButtonElement),
        })
      : null;

  const ownQuotaAction = (application: Application, own: boolean) =>
    !context.isAdmin
      ? null
      : own
        ? h('button', {
            type: 'button',
            class: 'link',
            'data-action': 'default-quota',
            text: quotaOf.get(application.id)?.plan
              ? 'Take it off the plan'
              : 'Back to the Application Default',
            onclick: (event: Event) =>
              void backToDefault(application, event.currentTarget as HTMLButtonElement),
          })
        : h('button', {
            type: 'button',
            class: 'link',
            'data-action': 'own-quota',
            text: 'Give it a quota of its own',
            onclick: (event: Event) => void giveOwn(application, event.currentTarget as HTMLButtonElement),
          });

  return keepDrawing(context, async () => {
    const quotaIds = [...new Set([...quotaOf.values()].map((quota) => quota.id))];
    const usages = new Map(
      await Promise.all(
        quotaIds.map(async (id) => [id, await context.api.get<QuotaUsage>(`/quotas/${id}/usage`)] as const),
      ),
    );
    replace(
      list,
      applications.map((application) => {
        const quota = quotaOf.get(application.id)!;
        const usage = usages.get(quota.id);
        const own = quota.id !== applicationDefaultQuotaId;
        const rows = quota.restrictions.map((restriction, index) => {
          const counted = usage?.restrictions.find((entry) => entry.index === index);
          const mine = counted?.applications?.find(
            (entry) => entry.application.toLowerCase() === application.id.toLowerCase(),
          );
          return h(
            'div',
            { class: 'restriction-usage' },
            h(
              'header',
              {},
              h('strong', { text: limitText(restriction) }),
              h('span', { class: 'muted', text: ` on ${scopeText(restriction, catalog)}` }),
              badge(modeBadge(restriction)),
            ),
            counted
              ? usageBar({
                  unit: counted.unit,
                  limit: counted.limit,
                  windowSeconds: counted.windowSeconds,
                  used: mine?.used ?? 0,
                  resetSeconds: mine?.resetSeconds ?? 0,
                })
              : null,
          );
        });
        return h(
          'article',
          { class: 'card application', 'data-application': application.id },
          h(
            'header',
            {},
            h('h3', { text: application.name }),
            h('span', {
              class: 'badge',
              text: application.known
                ? `${catalog.authType} caller`
                : application.declared
                  ? 'conf/'
                  : 'portal API',
            }),
            application.enabled ? null : h('span', { class: 'badge warn', text: 'disabled' }),
            h('div', { class: 'actions' }, resetAction(application)),
          ),
          application.description && !application.known
            ? h('p', { class: 'muted', text: application.description })
            : null,
          h(
            'p',
            {},
            quota.plan ? 'On the plan ' : own ? 'Its own quota: ' : 'No quota of its own: the ',
            h('a', { href: `#/quotas/${quota.id}`, text: quota.name }),
            own ? '. ' : ' applies. ',
            ownQuotaAction(application, own),
            ' ',
            planChoice(application, quota),
          ),
          rows.length > 0
            ? rows
            : h('p', {
                class: 'empty',
                text: 'That quota has no restrictions: nothing limits this application.',
              }),
        );
      }),
    );
  });
};
