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
      [customFetch]: boundedFetch,
    });
  }

  /** Fetches the set now (at start): a failure is told, and tokens wait for a later fetch. */
  async prefetch(): Promise<void> {
    await this.remote.reload().catch((error: unknown) => this.failed(error as Error));
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
      this.failed(error as Error);
      if (known) return createLocalJWKSet(known)(header, token);
      throw new JwksUnavailable();
    }
  };

  private failed(error: Error): void {
    this.failedAt = Date.now();
    this.options.onFailure(error);
  }
}

/** A JWK Set of a provider holds a few keys: a bigger document is refused before it fills memory. */
export const maxJwksBytes = 1 << 20;

/** fetch, with the body read up to `maxJwksBytes` (jose would read any size). */
async function boundedFetch(url: string, init: RequestInit): Promise<Response> {
  const response = await fetch(url, init);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.byteLength;
    if (size > maxJwksBytes) throw new errors.JWKSInvalid(`the JWKS document is over ${maxJwksBytes} bytes`);
    chunks.push(chunk);
  }
  return new Response(Buffer.concat(chunks), { status: response.status, headers: response.headers });
}

/** The set could not be fetched and no key is known yet: no token can be checked. */
export class JwksUnavailable extends Error {}
