import { catalogFromOpenApi, type Catalog } from '../logic/catalog.js';
import type { QuotaAnswer } from '../logic/quota-form.js';
import type { Api, CurrentUser } from './api.js';

/** An application as the admin API lists it. */
export interface Application {
  id: string;
  name: string;
  description: string;
  enabled: boolean;
  /** Declared in conf/ (read-only here). */
  declared: boolean;
  /** A caller of ldap, jwt or plugin, known by its quota (or plan), or by its usage now. */
  known?: 'quota' | 'usage';
}

/** What every view works with: the API, who is logged in, and the catalog by name. */
export interface Context {
  api: Api;
  user: CurrentUser;
  isAdmin: boolean;
  catalog(): Promise<Catalog>;
  /** Shows a short message at the top of the page (what was just done, or what went wrong). */
  notify(message: string, kind?: 'done' | 'error'): void;
  /** Draws the current view again (after a change it shows), ending what the old one polled. */
  reload(): void;
}

/** A view draws itself into `root` and answers what to do when the console leaves it (stop polling). */
export type View = (context: Context, root: HTMLElement, ...params: string[]) => Promise<(() => void) | void>;

export function createContext(
  api: Api,
  user: CurrentUser,
  notify: Context['notify'],
  reload: Context['reload'],
): Context {
  let catalog: Promise<Catalog> | null = null;
  return {
    api,
    user,
    isAdmin: user.role === 'admin',
    catalog() {
      catalog ??= api.get('/apis/openapi.json').then(catalogFromOpenApi, (error: unknown) => {
        catalog = null;
        throw error;
      });
      return catalog;
    },
    notify,
    reload,
  };
}

export const systemQuotaId = '00000000-0000-0000-0000-000000000000';
export const applicationDefaultQuotaId = '00000000-0000-0000-0000-000000000001';

/** The quotas' names for people: the well-known ones say what they do. */
export function quotaRole(quota: QuotaAnswer): string {
  if (quota.id === systemQuotaId) return 'System quota: all traffic, every application together';
  if (quota.id === applicationDefaultQuotaId)
    return 'Application Default: each application without a quota of its own';
  if (quota.application) return `Own quota of ${quota.application.name}`;
  if (quota.applicationCount !== undefined) {
    const on =
      quota.applicationCount === 1 ? '1 application is' : `${quota.applicationCount} applications are`;
    return `Plan: ${on} on it, each counted on its own`;
  }
  return quota.type === 'API'
    ? 'API quota: all traffic together'
    : 'Application quota: counted per application';
}

/** Waits `ms`, or until the page is visible again when it is hidden (no polling in a background tab). */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      document.removeEventListener('visibilitychange', onVisible);
      resolve();
    };
    const onVisible = () => {
      if (document.visibilityState === 'visible') done();
    };
    setTimeout(() => {
      if (document.visibilityState === 'visible') done();
      else document.addEventListener('visibilitychange', onVisible);
    }, ms);
  });
}
