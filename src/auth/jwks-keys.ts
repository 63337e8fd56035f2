import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  errors,
  type CryptoKey,
  type FlattenedJWSInput,
  type JWSHeaderParameters,
} from 'jose';

export interface JwksKeysOptions {
  /** Milliseconds after a fetch (good or failed) before a token with an unknown kid may fetch again. */
  cooldownMs: number;
  /** Milliseconds the keys are trusted before the set is fetched again. */
  maxAgeMs: number;
  /** Milliseconds a fetch may take. */
  timeoutMs: number;
  /** Told of each good fetch. */
  onFetch(): void;
  /** Told of each fetch failure, for the log. */
  onFailure(error: Error): void;
}

/** Key of a token's header, as jose's jwtVerify asks for it: a public key, or an HMAC secret. */
export type KeyResolver = (
  header: JWSHeaderParameters,
  token: FlattenedJWSInput,
) => Promise<CryptoKey | Uint8Array>;

/**
 * The identity provider's JWK Set. jose's remote set fetches it again for an unknown kid at most once
 * per cooldown after a good fetch; this adds the same pause after a failed one (so that made-up kids
 * cannot hammer an endpoint that is down), and keeps verifying with the keys already known while the
 * endpoint cannot be reached.
 */
export class JwksKeys {
  private readonly remote: ReturnType<typeof createRemoteJWKSet>;
  private failedAt = -Infinity;

  constructor(
    url: string,
    private readonly options: JwksKeysOptions,
  ) {
    this.remote = createRemoteJWKSet(new URL(url), {
      cooldownDuration: options.cooldownMs,
      cacheMaxAge: options.maxAgeMs,
      timeoutDuration: options.timeoutMs,
      [customFetch]: this.fetchOnce,
    });
  }

  /** Fetches the set now (at start): a failure is told, and tokens wait for a later fetch. */
  async prefetch(): Promise<void> {
    await this.remote.reload().catch(() => this.failed());
  }

  readonly resolve: KeyResolver = async (header, token) => {
    const known = this.remote.jwks();
    if (known && Date.now() < this.failedAt + this.options.cooldownMs)
      return createLocalJWKSet(known)(header, token);
    try {
      return await this.remote(header, token);
    } catch (error) {
      if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys)
        throw error;
      this.failed();
      if (known) return createLocalJWKSet(known)(header, token);
      throw new JwksUnavailable();
    }
  };

  private failed(): void {
    this.failedAt = Date.now();
  }

  /**
   * One fetch of the set, as jose asks for it, told to `onFetch` or `onFailure` once whichever of the
   * requests waiting on it: fetch with the body read up to `maxJwksBytes` (jose would read any size).
   */
  private readonly fetchOnce = async (url: string, init: RequestInit): Promise<Response> => {
    try {
      const response = await fetch(url, init);
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
      const body = Buffer.concat(chunks);
      if (response.status !== 200)
        throw new errors.JOSEError(`the JWKS endpoint answered ${response.status}`);
      JSON.parse(body.toString('utf8'));
      this.options.onFetch();
      return new Response(body, { status: response.status, headers: response.headers });
    } catch (error) {
      this.options.onFailure(error as Error);
      throw error;
    }
  };
}

/** A JWK Set of a provider holds a few keys: a bigger document is refused before it fills memory. */
export const maxJwksBytes = 1 << 20;

/** The set could not be fetched and no key is known yet: no token can be checked. */
export class JwksUnavailable extends Error {}
