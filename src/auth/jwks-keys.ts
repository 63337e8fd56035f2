import {
  createLocalJWKSet,
  errors,
  type CryptoKey,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWSHeaderParameters,
} from 'jose';
import type { Span } from '@opentelemetry/api';
import type { Clock } from '../kit/clock.js';
import { markFailed, serverOf, startClientSpan, type AuthTracing } from './auth-tracing.js';

export interface JwksKeysOptions {
  /** Milliseconds after a fetch (good or failed) ends before a token with an unknown kid may fetch again. */
  cooldownMs: number;
  /** Milliseconds the keys are trusted before the set is fetched again (in the background). */
  maxAgeMs: number;
  /** Milliseconds a fetch may take, body included. */
  timeoutMs: number;
  /** The clock of the cooldown, the age of the keys and the fetch timeout (tests move it). */
  clock: Clock;
  /** Told of each good fetch. */
  onFetch(): void;
  /** Told of each fetch failure, for the log. */
  onFailure(error: Error): void;
  /**
   * Whether a token's claims, read before its signature is checked, are those a real token of the
   * provider carries (its issuer, an audience the gateway accepts). Such a token's unknown kid may fetch
   * the set within the cooldown: once per kid, and for `vouchedKidsPerCooldown` kids at most.
   */
  vouches?(token: FlattenedJWSInput): boolean;
}

/** Key of a token's header, as jose's jwtVerify asks for it: a public key, or an HMAC secret. */
export type KeyResolver = (
  header: JWSHeaderParameters,
  token: FlattenedJWSInput,
) => Promise<CryptoKey | Uint8Array>;

/**
 * The identity provider's JWK Set, its keys chosen for a token by jose's local set. The fetches are
 * scheduled here rather than by jose's remote set, which reads the wall clock and makes every request
 * wait on the refetch once the set is old:
 * - a token with a known kid never waits on a fetch: an old set is fetched again in the background;
 * - a token with an unknown kid fetches the set again, at most once per cooldown after a fetch ended,
 *   good or failed, so made-up kids cannot hammer the endpoint (the tokens that come meanwhile wait on
 *   the fetch under way, or are refused);
 * - within the cooldown after a good fetch, a token whose unverified claims check out (`vouches`) may
 *   fetch it once per kid, for a few kids per cooldown: a made-up kid that fetched a moment before cannot
 *   hold a real rotation back for a whole cooldown, and forged claims fetch no more than those few times;
 * - the keys already known keep verifying while the endpoint is down, slow or answers nonsense;
 * - before any key is known, a token waits on the fetch under way (the timeout bounds it), then is
 *   `JwksUnavailable`.
 */
export class JwksKeys {
  private known: ReturnType<typeof createLocalJWKSet> | null = null;
  private fetchedAt = -Infinity;
  private settledAt = -Infinity;
  private pending: Promise<void> | null = null;
  /** The client span of the fetch under way, when a traced request started it: its waiters link to it. */
  private pendingSpan: Span | null = null;
  /** The kids that fetched the set within the cooldown on their claims' word, since `vouchedSince`. */
  private readonly vouchedKids = new Set<string>();
  private vouchedSince = -Infinity;
  /** The last fetch failed: the cooldown then holds for every token, to spare an endpoint in trouble. */
  private lastFailed = false;

  constructor(
    private readonly url: string,
    private readonly options: JwksKeysOptions,
  ) {}

  /** Fetches the set now (at start): a failure is told, and tokens wait for a later fetch. */
  prefetch(): Promise<void> {
    return this.fetch();
  }

  /**
   * The key of a token's header. A fetch the token waits on is traced under `tracing`: the fetch it
   * starts as a client span of its authentication, the one under way as a link to that fetch's span.
   */
  readonly resolve = async (
    header: JWSHeaderParameters,
    token: FlattenedJWSInput,
    tracing?: AuthTracing,
  ): Promise<CryptoKey | Uint8Array> => {
    const known = this.known;
    if (known) {
      try {
        const key = await known(header, token);
        const old = this.options.clock.now() >= this.fetchedAt + this.options.maxAgeMs;
        if (old && this.mayFetch()) void this.fetch();
        return key;
      } catch (error) {
        if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
        const fetched = this.fetchFor(header, token, tracing);
        if (!fetched) throw error;
        await fetched;
      }
    } else await this.fetchFor(header, token, tracing);
    // The keys the fetch brought, or those known before it (a failed fetch keeps them).
    const keys = this.known as typeof known;
    if (!keys) throw new JwksUnavailable();
    return keys(header, token);
  };

  /** A fetch is under way (to wait on), or the cooldown since the last one has passed. */
  private mayFetch(): boolean {
    return this.pending !== null || this.options.clock.now() >= this.settledAt + this.options.cooldownMs;
  }

  /**
   * The fetch a token whose kid no known key has may wait on: the one under way, a new one once the
   * cooldown has passed or when its claims vouch for its kid, else null.
   */
  private fetchFor(
    header: JWSHeaderParameters,
    token: FlattenedJWSInput,
    tracing: AuthTracing | undefined,
  ): Promise<void> | null {
    if (this.mayFetch() || this.vouchedFor(header.kid, token)) return this.fetch(tracing);
    return null;
  }

  /**
   * Whether `token`'s claims vouch for its `kid`, once per kid and for a few kids per cooldown, after a
   * good fetch (an endpoint that failed last is given its cooldown whoever asks).
   */
  private vouchedFor(kid: string | undefined, token: FlattenedJWSInput): boolean {
    if (kid === undefined || this.lastFailed || this.options.vouches?.(token) !== true) return false;
    const now = this.options.clock.now();
    if (now >= this.vouchedSince + this.options.cooldownMs) {
      this.vouchedKids.clear();
      this.vouchedSince = now;
    }
    if (this.vouchedKids.has(kid) || this.vouchedKids.size >= vouchedKidsPerCooldown) return false;
    this.vouchedKids.add(kid);
    return true;
  }

  /**
   * The fetch under way, or a new one; it never rejects (a failure is told to `onFailure`). A traced
   * request that starts it has it as a client span; one that waits on it links its authentication span
   * to that span (the fetch belongs to the trace that started it, the link crosses traces).
   */
  private fetch(tracing?: AuthTracing): Promise<void> {
    if (this.pending) {
      if (tracing) {
        tracing.span.setAttribute('quotagate.auth.jwks_wait', true);
        if (this.pendingSpan) tracing.span.addLink({ context: this.pendingSpan.spanContext() });
      }
      return this.pending;
    }
    const span = tracing ? startFetchSpan(tracing, this.url) : null;
    this.pendingSpan = span;
    this.pending = fetchJwks(this.url, this.options, span)
      .then(
        (set) => {
          this.known = createLocalJWKSet(set);
          this.fetchedAt = this.options.clock.now();
          this.lastFailed = false;
          this.options.onFetch();
        },
        (error: unknown) => {
          this.lastFailed = true;
          this.options.onFailure(error as Error);
        },
      )
      .finally(() => {
        span?.end();
        this.pending = null;
        this.pendingSpan = null;
        this.settledAt = this.options.clock.now();
      });
    return this.pending;
  }
}

/**
 * One GET of the JWK Set at `url` within `timeoutMs` on `clock`, its body read up to `maxJwksBytes` (a
 * provider's set holds a few keys); a redirect is not followed (as jose's remote set does not).
 * @throws a jose error (or a SyntaxError) saying why the set could not be had.
 */
export async function fetchJwks(
  url: string,
  { clock, timeoutMs }: Pick<JwksKeysOptions, 'clock' | 'timeoutMs'>,
  span: Span | null = null,
): Promise<JSONWebKeySet> {
  let status = 0;
  const controller = new AbortController();
  const timer = clock.setTimeout(
    () => controller.abort(new errors.JWKSTimeout(`the JWKS endpoint did not answer within ${timeoutMs} ms`)),
    timeoutMs,
  );
  try {
    const response = await fetch(url, {
      signal: controller.signal,
      redirect: 'manual',
      headers: { accept: 'application/json, application/jwk-set+json' },
    });
    status = response.status;
    span?.setAttribute('http.response.status_code', status);
    const chunks: Uint8Array[] = [];
    let size = 0;
    // A reader rather than `for await`: the DOM's ReadableStream type (the browser tests' lib) has no
    // async iterator.
    const reader = response.body?.getReader();
    for (let read = await reader?.read(); read && !read.done; read = await reader!.read()) {
      size += read.value.byteLength;
      if (size > maxJwksBytes) {
        await reader!.cancel();
        throw new errors.JWKSInvalid(`the JWKS document is over ${maxJwksBytes} bytes`);
      }
      chunks.push(read.value);
    }
    if (response.status !== 200) throw new errors.JOSEError(`the JWKS endpoint answered ${response.status}`);
    const set = JSON.parse(Buffer.concat(chunks).toString('utf8')) as JSONWebKeySet;
    // jose's local set refuses anything but a JWK Set (JWKSInvalid).
    createLocalJWKSet(set);
    return set;
  } catch (error) {
    // The HTTP conventions' error.type: the status when it was not 200, else the error's class.
    if (span) markFailed(span, status !== 0 && status !== 200 ? String(status) : (error as Error).name);
    throw error;
  } finally {
    clock.clearTimeout(timer);
  }
}

/**
 * The JWKS URL as a span or a log line shows it: its user and password (if it has any) redacted, and
 * without its query and fragment, which may hold a credential the provider takes (`?token=…`, a signed
 * URL's signature), as the upstream client spans' `url.full` is without the query.
 */
export function shownJwksUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.username !== '') parsed.username = 'REDACTED';
  if (parsed.password !== '') parsed.password = 'REDACTED';
  parsed.search = '';
  parsed.hash = '';
  return parsed.href;
}

/**
 * The client span of a fetch of the JWK Set at `url`, as the HTTP semantic conventions have it: named by
 * its method, with the URL as `shownJwksUrl` has it.
 */
function startFetchSpan(tracing: AuthTracing, url: string): Span {
  return startClientSpan(tracing, 'GET', {
    'http.request.method': 'GET',
    'url.full': shownJwksUrl(url),
    ...serverOf(url, new URL(url).protocol === 'https:' ? 443 : 80),
  });
}

/** Kids whose claims check out that may each fetch the set once within a cooldown. */
const vouchedKidsPerCooldown = 3;

/** A JWK Set of a provider holds a few keys: a bigger document is refused before it fills memory. */
export const maxJwksBytes = 1 << 20;

/** The set could not be fetched and no key is known yet: no token can be checked. */
export class JwksUnavailable extends Error {}
