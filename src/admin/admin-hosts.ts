import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

/** What decides the Host names the admin listener answers. */
export interface AdminHostSettings {
  /** `admin.host`: the address or name it listens on. */
  host: string;
  /** `admin.allowedHosts`: more names; one with a leading dot also allows its subdomains. */
  allowedHosts: readonly string[];
}

/**
 * Whether the admin listener answers a request for `host` (its Host field, or the authority of an
 * absolute-form target), against DNS rebinding: a page of another site whose name it rebinds to this
 * address makes the browser send that name, so only names the operator chose are answered, as Vite and
 * webpack-dev-server do. IP literals cannot be rebound and are always answered, as are `localhost` and
 * its subdomains (RFC 6761: they never leave the machine); the port is not checked, so that a forwarded
 * port (`kubectl port-forward`, an SSH tunnel) reaches the console. No Host at all (HTTP/1.0) is answered.
 */
export function adminHostCheck(settings: AdminHostSettings): (host: string | undefined) => boolean {
  const exact = new Set<string>(['localhost']);
  const suffixes = ['.localhost'];
  if (isIP(settings.host) === 0) exact.add(settings.host.toLowerCase());
  for (const allowed of settings.allowedHosts) {
    const name = allowed.toLowerCase().replace(/\.$/, '');
    if (name.startsWith('.')) {
      exact.add(name.slice(1));
      suffixes.push(name);
    } else exact.add(name);
  }
  return (host) => {
    if (host === undefined) return true;
    const name = hostnameOf(host);
    if (name === null) return false;
    if (isIP(name) !== 0 || exact.has(name)) return true;
    for (const suffix of suffixes) if (name.endsWith(suffix)) return true;
    return false;
  };
}

/**
 * The name or IP literal of a Host value, lower case, without its port and trailing dot; an IPv6 literal
 * without its brackets (a bracketed name is not one: null).
 */
export function hostnameOf(host: string): string | null {
  const value = host.trim().toLowerCase();
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    const inside = end === -1 ? '' : value.slice(1, end);
    return isIP(inside) === 6 ? inside : null;
  }
  const colon = value.indexOf(':');
  return (colon === -1 ? value : value.slice(0, colon)).replace(/\.$/, '');
}

/** Why the admin listener does not answer `req`, or null when it does. */
export function hostRefusal(
  req: IncomingMessage,
  answersHost: (host: string | undefined) => boolean,
): { status: 400 | 421; message: string } | null {
  // Several Host lines are joined with a comma (joinDuplicateHeaders), as the data plane's screening reads them.
  if (req.headers.host?.includes(',')) return { status: 400, message: 'a request has one Host field' };
  const target = req.url ?? '/';
  const host = target.startsWith('/') || target === '*' ? req.headers.host : authorityOf(target);
  if (answersHost(host)) return null;
  const name = host === undefined ? null : hostnameOf(host);
  return {
    status: 421,
    message: `This listener does not answer the name ${name ?? host ?? ''}: add it to admin.allowedHosts`,
  };
}

/** The authority of an absolute-form target, which names the host the request is for (RFC 9112 3.2.2). */
function authorityOf(target: string): string {
  try {
    return new URL(target).host;
  } catch {
    return target;
  }
}
