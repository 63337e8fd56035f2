import { createHash } from 'node:crypto';
import {
  errors,
  jwtVerify,
  type CryptoKey,
  type FlattenedJWSInput,
  type JWSHeaderParameters,
  type JWTPayload,
} from 'jose';
import { LRUCache } from 'lru-cache';
import { asymmetricAlgorithms, hmacAlgorithms, hmacAlgorithmsFor, type Config } from '../config/schema.js';
import { dateAt, systemClock, type Clock } from '../kit/clock.js';
import type { Logger } from '../observe/log.js';
import type { AuthTracing } from './auth-tracing.js';
import {
  admitted,
  type Authenticator,
  type AuthRefusalCause,
  type AuthResult,
  type Principal,
} from './authenticator.js';
import { bearerChallenge, realm } from './challenges.js';
import { JwksKeys, JwksUnavailable, shownJwksUrl, type KeyResolver } from './jwks-keys.js';
import { builtInSecurity } from './swagger-security.js';

type JwtSettings = NonNullable<Config['jwt']>;

export interface JwtAuthenticatorOptions {
  logger: Logger;
  /**
   * The clock of exp and nbf, the verified tokens' lifetimes, and the JWKS's cooldown, age and fetch
   * timeout (tests move it).
   */
  clock?: Clock;
  onJwksFetch?: (result: 'ok' | 'failed') => void;
  /** Whether the JWK Set is fetched now rather than for the first token (default true). */
  fetchKeysAtStart?: boolean;
}

const noToken: AuthResult = Object.freeze({
  ok: false,
  reject: 'unauthorized',
  challenge: bearerChallenge,
  cause: 'no_credentials',
});
const unavailable: AuthResult = Object.freeze({ ok: false, reject: 'service_unavailable' });

/** RFC 6750 section 3.1 `invalid_token`, with a description (a quoted-string: no quote or backslash). */
function invalidToken(description: string, cause: AuthRefusalCause): AuthResult {
  const quoted = description.replace(/[^\x20-\x7e]|["\\]/g, '?');
  return Object.freeze({
    ok: false,
    reject: 'unauthorized',
    challenge: `Bearer realm="${realm}", error="invalid_token", error_description="${quoted}"`,
    cause,
  });
}

const refusals = {
  malformed: invalidToken('the token is not a signed JWT', 'malformed_token'),
  algorithm: invalidToken(
    'the token is signed with an algorithm the gateway does not accept',
    'algorithm_refused',
  ),
  signature: invalidToken('the signature is not valid', 'bad_signature'),
  expired: invalidToken('the token has expired', 'expired_token'),
  noKey: invalidToken('no key of the identity provider matches the token', 'unknown_signing_key'),
};

/** Why jose refused a token, as the challenge says it. */
function refusalOf(error: unknown): AuthResult | null {
  if (error instanceof errors.JWTExpired) return refusals.expired;
  if (error instanceof errors.JWTClaimValidationFailed)
    return invalidToken(`the ${error.claim} claim is not accepted: ${error.reason}`, 'claim_refused');
  if (error instanceof errors.JOSEAlgNotAllowed) return refusals.algorithm;
  if (error instanceof errors.JWSSignatureVerificationFailed) return refusals.signature;
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys)
    return refusals.noKey;
  if (error instanceof errors.JOSEError || error instanceof TypeError) return refusals.malformed;
  return null;
}

/** The token of `Authorization: Bearer <token>` (RFC 6750 section 2.1), or null. */
function bearerToken(authorization: string | undefined): string | null {
  const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(authorization ?? '');
  return match ? match[1]! : null;
}

/**
 * `APIKeyAuthType: 'jwt'`: a bearer token signed by the identity provider (a key of its JWKS) or with
 * `jwt.secret`, checked by jose for signature, exp, nbf, iss and aud. The application is the value of
 * `applicationClaim`. An HMAC token is checked with the secret only and an asymmetric one with the JWKS
 * only, so that a public key can never serve as an HMAC secret (algorithm confusion).
 */
export function createJwtAuthenticator(
  settings: JwtSettings,
  options: JwtAuthenticatorOptions,
): Authenticator {
  const { logger } = options;
  const clock = options.clock ?? systemClock;
  const now = () => clock.now();
  const secret = settings.secret ? new TextEncoder().encode(settings.secret) : null;
  // The log shows the URL without its query, which may hold the provider's credential.
  const shownJwksUri = settings.jwksUri ? shownJwksUrl(settings.jwksUri) : undefined;
  const jwks = settings.jwksUri
    ? new JwksKeys(settings.jwksUri, {
        cooldownMs: settings.jwksCooldown,
        maxAgeMs: 10 * 60_000,
        timeoutMs: settings.jwksTimeout,
        clock,
        onFetch: () => options.onJwksFetch?.('ok'),
        onFailure: (error) => {
          options.onJwksFetch?.('failed');
          // The serializer of `err` takes an object: a bare string would be logged letter by letter.
          logger.warn(
            { jwksUri: shownJwksUri, err: { name: error.name, message: error.message } },
            'jwks fetch failed',
          );
        },
        vouches: (token) => claimsCheckOut(token, settings),
      })
    : null;
  if (jwks && options.fetchKeysAtStart !== false) void jwks.prefetch();
  const algorithms = settings.algorithms ?? [
    ...(jwks ? asymmetricAlgorithms : []),
    ...(settings.secret ? hmacAlgorithmsFor(settings.secret) : []),
  ];
  const isHmac = (alg: unknown) => (hmacAlgorithms as readonly unknown[]).includes(alg);
  /** The key of a token; a fetch of the JWK Set it waits on is traced under `tracing`. */
  const keyOf = async (
    header: JWSHeaderParameters,
    token: FlattenedJWSInput,
    tracing?: AuthTracing,
  ): Promise<CryptoKey | Uint8Array> => {
    if (isHmac(header.alg)) {
      if (!secret) throw new errors.JOSEAlgNotAllowed('HMAC tokens need jwt.secret');
      return secret;
    }
    if (!jwks) throw new errors.JOSEAlgNotAllowed('asymmetric tokens need jwt.jwksUri');
    return jwks.resolve(header, token, tracing);
  };
  const key: KeyResolver = (header, token) => keyOf(header, token);

  // Verified tokens by their hash, until their exp at the latest: a caller repeating its token is not
  // checked again for a while.
  const verified = new LRUCache<string, Principal>({ max: 10_000, ttl: 5 * 60_000, perf: { now } });

  async function verify(token: string, tracing: AuthTracing | undefined): Promise<AuthResult> {
    let payload: JWTPayload;
    // A traced request's resolver is its own (an allocation only then), to hand its span down.
    const resolver: KeyResolver = tracing ? (header, jws) => keyOf(header, jws, tracing) : key;
    try {
      ({ payload } = await jwtVerify(token, resolver, {
        algorithms: [...algorithms],
        issuer: settings.issuer,
        audience: settings.audience,
        clockTolerance: settings.clockTolerance,
        requiredClaims: ['exp'],
        currentDate: dateAt(now()),
      }));
    } catch (error) {
      if (error instanceof JwksUnavailable) return unavailable;
      const refusal = refusalOf(error);
      if (refusal) return refusal;
      throw error;
    }
    const application = payload[settings.applicationClaim];
    if (typeof application !== 'string' || application === '')
      return invalidToken(`the token has no ${settings.applicationClaim} claim`, 'claim_refused');
    const upstreamFields = claimFields(payload, settings.forwardClaims);
    const principal: Principal = {
      ...(upstreamFields.length > 0 ? { upstreamFields } : {}),
      subject: typeof payload.sub === 'string' ? payload.sub : application,
      application,
      // jose takes a token until its exp has passed by clockTolerance: so do the exchanges it opened.
      expiresAt: (payload.exp! + settings.clockTolerance) * 1000,
    };
    const lifetime = payload.exp! * 1000 - now();
    if (lifetime > 0) verified.set(hashOf(token), principal, { ttl: Math.min(lifetime, 5 * 60_000) });
    return admitted(principal);
  }

  return {
    scheme: 'jwt',
    authenticate(req, _res, _path, tracing) {
      const token = bearerToken(req.headers.authorization);
      if (!token) return noToken;
      const known = verified.get(hashOf(token));
      // The cache keeps a token while its age is at most its lifetime: at exp itself, it no longer holds.
      const remembered = known !== undefined && now() < known.expiresAt!;
      tracing?.span.setAttribute('quotagate.auth.cached', remembered);
      return remembered ? admitted(known) : verify(token, tracing);
    },
    documentation: { swaggerSecurity: builtInSecurity.jwt },
  };
}

/**
 * Whether the claims of `token`, read before its signature is checked, name the issuer and an audience
 * the gateway accepts, as every real token of the provider does. Anyone who knows those two can write
 * them: this bounds how often made-up kids fetch the JWK Set, it proves nothing.
 */
function claimsCheckOut(token: FlattenedJWSInput, settings: JwtSettings): boolean {
  // A JWT's payload is base64url text (RFC 7519 section 3); jwtVerify hands it over as it came.
  if (typeof token.payload !== 'string') return false;
  let claims: JWTPayload;
  try {
    claims = JSON.parse(Buffer.from(token.payload, 'base64url').toString('utf8')) as JWTPayload;
  } catch {
    return false;
  }
  if (typeof claims !== 'object' || claims === null || claims.iss !== settings.issuer) return false;
  const accepted: readonly string[] =
    typeof settings.audience === 'string' ? [settings.audience] : settings.audience;
  const given: unknown[] = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  return given.some((audience) => typeof audience === 'string' && accepted.includes(audience));
}

/**
 * The request fields of `forwardClaims`: a claim's string, or the JSON of any other value. A claim the
 * token lacks, or one whose value is not visible ASCII, sends no field.
 */
function claimFields(payload: JWTPayload, forwardClaims: Record<string, string> = {}): string[] {
  const fields: string[] = [];
  for (const [claim, field] of Object.entries(forwardClaims)) {
    const value = payload[claim];
    if (value === undefined) continue;
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    if (/^[\x20-\x7e]*$/.test(text)) fields.push(field.toLowerCase(), text);
  }
  return fields;
}

const hashOf = (token: string) => createHash('sha256').update(token).digest('base64');
