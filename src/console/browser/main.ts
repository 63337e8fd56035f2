import { Api, ApiError, messageOf, type CurrentUser } from './api.js';
import { applicationsView } from './applications-view.js';
import './components.js';
import { createContext, type Context, type View } from './context.js';
import { docsView } from './docs-view.js';
import { h, replace } from './dom.js';
import { historyView } from './history-view.js';
import { quotaEditorView } from './quota-editor-view.js';
import { quotasView } from './quotas-view.js';
import { usageView } from './usage-view.js';

/** The tabs, by the hash that opens them. */
const tabs: Array<{ hash: string; label: string; view: View }> = [
  { hash: '#/quotas', label: 'Quotas', view: quotasView },
  { hash: '#/usage', label: 'Live usage', view: usageView },
  { hash: '#/history', label: 'History', view: historyView },
  { hash: '#/applications', label: 'Applications', view: applicationsView },
  { hash: '#/docs', label: 'API documentation', view: docsView },
];

const app = document.getElementById('app')!;
const api = new Api();
let leave: (() => void) | void = undefined;

function notifier(area: HTMLElement): Context['notify'] {
  let timer: number | undefined;
  return (message, kind = 'done') => {
    replace(
      area,
      h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status', text: message }),
    );
    clearTimeout(timer);
    timer = window.setTimeout(() => replace(area), kind === 'error' ? 10_000 : 4_000);
  };
}

/** Routes drawn so far: a view whose data comes after a later route began is of no use. */
let routes = 0;

/**
 * Draws the view the hash names (a quota's form for #/quotas/<id>). Each route draws into an area of
 * its own: a view still waiting for its data when another tab is chosen draws, when its answer comes,
 * into an area no longer shown, and is left at once, instead of covering the tab chosen after it.
 */
async function route(context: Context, main: HTMLElement, nav: HTMLElement): Promise<void> {
  leave?.();
  leave = undefined;
  const current = (routes += 1);
  const hash = location.hash || '#/quotas';
  const quota = /^#\/quotas\/(.+)$/.exec(hash);
  const tab = tabs.find((candidate) => hash === candidate.hash) ?? tabs[0]!;
  for (const link of nav.querySelectorAll('a'))
    link.toggleAttribute('aria-current', link.getAttribute('href') === tab.hash);
  const area = h('div', { class: 'view' });
  replace(main, area);
  replace(area, h('p', { class: 'muted', text: 'Loading…' }));
  try {
    const left = quota
      ? await quotaEditorView(context, area, decodeURIComponent(quota[1]!))
      : await tab.view(context, area);
    if (current === routes) leave = left;
    else left?.();
  } catch (error) {
    const message = messageOf(error);
    replace(
      area,
      h('p', { class: 'error', role: 'alert', text: `This page could not be shown: ${message}` }),
    );
  }
}

function shell(user: CurrentUser): void {
  const notices = h('div', { class: 'notices' });
  const nav = h(
    'nav',
    {},
    tabs.map((tab) => h('a', { href: tab.hash, text: tab.label })),
  );
  const main = h('main', {});
  const context: Context = createContext(api, user, notifier(notices), () => void route(context, main, nav));
  replace(
    app,
    h(
      'header',
      { class: 'top' },
      h('h1', { text: 'quotagate' }),
      nav,
      h(
        'div',
        { class: 'who' },
        h('span', {
          text: `${user.loginName} · ${user.role === 'admin' ? 'API Administrator' : 'portal member'}`,
        }),
        h('button', {
          type: 'button',
          class: 'link',
          text: 'Log out',
          onclick: async () => {
            leave?.();
            await api.logout();
            loginScreen();
          },
        }),
      ),
    ),
    notices,
    main,
  );
  window.onhashchange = () => void route(context, main, nav);
  void route(context, main, nav);
}

function loginScreen(message = ''): void {
  window.onhashchange = null;
  const error = h('p', { class: 'error', role: 'alert', text: message });
  const username = h('input', {
    name: 'username',
    autocomplete: 'username',
    required: true,
    autofocus: true,
  }) as HTMLInputElement;
  const password = h('input', {
    name: 'password',
    type: 'password',
    autocomplete: 'current-password',
    required: true,
  }) as HTMLInputElement;
  const submit = async (event: Event) => {
    event.preventDefault();
    error.textContent = '';
    try {
      shell(await api.login(username.value, password.value));
    } catch (failure) {
      error.textContent =
        failure instanceof ApiError && failure.status === 401
          ? 'That username and password do not match an admin user of this gateway.'
          : failure instanceof Error
            ? failure.message
            : String(failure);
    }
  };
  replace(
    app,
    h(
      'form',
      { class: 'login card', onsubmit: submit },
      h('h1', { text: 'quotagate' }),
      h('p', { class: 'muted', text: 'Log in with an admin user of this gateway (admin.users in conf/).' }),
      h('label', { class: 'field' }, h('span', { text: 'Username' }), username),
      h('label', { class: 'field' }, h('span', { text: 'Password' }), password),
      error,
      h('button', { type: 'submit', class: 'primary', text: 'Log in' }),
    ),
  );
}

api.onSignedOut = () => {
  leave?.();
  leave = undefined;
  loginScreen('Your session ended: log in again.');
};

const user = await api.resume();
if (user) shell(user);
else loginScreen();
