import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { upstreamTargets, type ApiConfig } from '../config/schema.js';
import type { Clock } from '../kit/clock.js';
import type { Logger } from '../observe/log.js';

/**
 * Resolves a host name to its addresses (IPv4 or IPv6, as text).
 * @throws when the name cannot be resolved (its promise rejects)
 */
export type HostResolver = (hostname: string) => Promise<readonly string[]>;

/**
 * The system's resolver, as every connection Node opens by name resolves it: getaddrinfo through
 * `dns.lookup`, so that /etc/hosts, nsswitch and the search domains of resolv.conf apply (a Kubernetes
 * Service's short name resolves as it does for any program of the pod, and a target resolves as it would
 * were its connections left to resolve it). c-ares' `resolve4`/`resolve6` would skip /etc/hosts and
 * take two queries; what lookup costs is a thread of libuv's pool per name each `dnsRefresh`.
 */
export const systemResolver: HostResolver = async (hostname) =>
  (await lookup(hostname, { all: true })).map(({ address }) => address);

/** The addresses a host name resolved to last, sorted; null while it has none (not yet resolved). */
export type AddressesOf = (hostname: string) => readonly string[] | null;

/** A gateway that resolves nothing: every target stays as configured. */
export const noAddresses: AddressesOf = () => null;

/** One target of a pool as exchanges are sent to it: an address of a configured target, or that target. */
export interface ResolvedTarget {
  /** The configured URL with the address in place of its host name (as configured when not resolved). */
  readonly url: string;
  /** The origin of `url`: where connections go, and what the target's state is kept by. */
  readonly origin: string;
  /**
   * The configured host (name and port) that the Host field, TLS's SNI and the certificate check carry
   * when `origin` is an address; null when `origin` is as configured.
   */
  readonly host: string | null;
  /** The configured target's weight: each of its addresses has it whole (as Envoy's STRICT_DNS does). */
  readonly weight: number;
}

/**
 * The targets of a pool for `targets` as configured: one per address each host name resolved to, with
 * the name's weight; a target whose host is an IP literal, or a name not resolved yet, as it is. An address
 * that two configured targets resolve to is one target, the first's.
 */
export function resolvedTargets(
  targets: ReadonlyArray<{ url: string; weight: number }>,
  addressesOf: AddressesOf,
): ResolvedTarget[] {
  const resolved: ResolvedTarget[] = [];
  const seen = new Set<string>();
  const add = (target: ResolvedTarget) => {
    if (seen.has(target.origin)) return;
    seen.add(target.origin);
    resolved.push(target);
  };
  for (const { url, weight } of targets) {
    const at = new URL(url);
    const addresses = isAddress(at.hostname) ? null : addressesOf(at.hostname);
    if (addresses === null) {
      add({ url, origin: at.origin, host: null, weight });
      continue;
    }
    const { host } = at;
    for (const address of addresses) {
      at.hostname = isIP(address) === 6 ? `[${address}]` : address;
      add({ url: at.href, origin: at.origin, host, weight });
    }
  }
  return resolved;
}

/** Whether a URL's hostname is an IP literal (IPv6 in its brackets), which is never resolved. */
const isAddress = (hostname: string): boolean => isIP(hostname.replace(/^\[(.*)\]$/, '$1')) !== 0;

interface WatchedName {
  readonly hostname: string;
  /** Milliseconds from one resolution to the next: the least `dnsRefresh` of the APIs that name it. */
  refresh: number;
  /** The addresses of the last resolution that gave some, sorted; null until one has. */
  addresses: readonly string[] | null;
  /** The last resolution failed: its warning was logged, and is not again until one succeeds. */
  failing: boolean;
  /** The timer of the next resolution. */
  timer: unknown;
  /** The resolution under way, if any. */
  running: Promise<void> | null;
}

/**
 * Resolves the host names of the pools' targets every `upstream.dnsRefresh` ms on the injected timers,
 * each distinct name once (at the least refresh of the APIs that name it), the first as it is configured.
 *
 * A resolution that fails (or answers no address) keeps the addresses the name had; a name never
 * resolved yet stays a target as configured, whose connections resolve it as they open. When a name's
 * addresses change, `changed` is told: the pools are made again from them, and the state of each address
 * (health, standing, counts) is kept by its API's id and its origin.
 */
export class TargetAddresses {
  private readonly names = new Map<string, WatchedName>();

  constructor(
    private readonly resolve: HostResolver,
    private readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
    private readonly logger: Logger,
    /** Told when the addresses of a name changed (not when a resolution fails or answers the same). */
    private readonly changed: () => void,
  ) {}

  /** The addresses `hostname` resolved to last, sorted; null while it has none. */
  readonly addressesOf: AddressesOf = (hostname) => this.names.get(hostname)?.addresses ?? null;

  /**
   * Resolves the host names of the targets of `apis` (the config's, at start and at each reload): new
   * names from now, known ones at their new refresh with the addresses they have, and no more those gone.
   */
  watch(apis: readonly ApiConfig[]): void {
    const wanted = new Map<string, number>();
    for (const api of apis) {
      if (typeof api.upstream === 'string') continue;
      for (const { url } of upstreamTargets(api.upstream)) {
        const { hostname } = new URL(url);
        if (isAddress(hostname)) continue;
        wanted.set(hostname, Math.min(wanted.get(hostname) ?? Infinity, api.upstream.dnsRefresh));
      }
    }
    for (const [hostname, name] of this.names)
      if (!wanted.has(hostname)) {
        this.timers.clearTimeout(name.timer);
        this.names.delete(hostname);
      }
    for (const [hostname, refresh] of wanted) {
      const known = this.names.get(hostname);
      if (known === undefined) {
        const name: WatchedName = {
          hostname,
          refresh,
          addresses: null,
          failing: false,
          timer: null,
          running: null,
        };
        this.names.set(hostname, name);
        this.run(name);
      } else if (known.refresh !== refresh) {
        known.refresh = refresh;
        this.timers.clearTimeout(known.timer);
        known.timer = this.timers.setTimeout(() => this.run(known), refresh);
      }
    }
  }

  /** Resolves once the resolutions under way have ended (tests move the clock, then wait for them). */
  async idle(): Promise<void> {
    await Promise.all([...this.names.values()].map(({ running }) => running));
  }

  /** Stops every refresh; call as the gateway closes. */
  close(): void {
    for (const name of this.names.values()) this.timers.clearTimeout(name.timer);
    this.names.clear();
  }

  /** Resolves the name (unless the resolution before is still under way) and sets the timer of the next. */
  private run(name: WatchedName): void {
    name.timer = this.timers.setTimeout(() => this.run(name), name.refresh);
    if (name.running !== null) return;
    name.running = this.resolveName(name).finally(() => (name.running = null));
  }

  private async resolveName(name: WatchedName): Promise<void> {
    let addresses: string[];
    try {
      addresses = [...new Set(await this.resolve(name.hostname))].sort();
      if (addresses.length === 0) throw new Error('the name resolved to no address');
    } catch (error) {
      if (this.names.get(name.hostname) === name) this.failed(name, error as NodeJS.ErrnoException);
      return;
    }
    // A reload dropped the name while it was resolved.
    if (this.names.get(name.hostname) !== name) return;
    if (name.failing) {
      name.failing = false;
      this.logger.info({ host: name.hostname, addresses }, 'upstream host name resolved again');
    }
    if (name.addresses !== null && sameAddresses(name.addresses, addresses)) return;
    this.logger.info(
      { host: name.hostname, addresses, before: name.addresses },
      'upstream host name resolved to new addresses: they are its targets',
    );
    name.addresses = addresses;
    this.changed();
  }

  private failed(name: WatchedName, error: NodeJS.ErrnoException): void {
    if (name.failing) return;
    name.failing = true;
    this.logger.warn(
      { host: name.hostname, err: { code: error.code, message: error.message }, addresses: name.addresses },
      name.addresses === null
        ? 'upstream host name not resolved: its target stays the name, resolved as each connection opens'
        : 'upstream host name not resolved: its targets keep the addresses it had',
    );
  }
}

const sameAddresses = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((address, i) => address === b[i]);
