import type { IncomingMessage } from 'node:http';
import type { AuthResult, Authenticator } from './authenticator.js';
import { apiKeyChallenge, basicChallenge, bearerChallenge } from './challenges.js';

/** The kinds of credentials a request can carry, each read by one scheme of a list. */
type CredentialKind = 'bearer' | 'basic' | 'apikey';

/**
 * What each scheme a list may hold reads, and its challenge to a request without it (the config check
 * keeps `none` and `plugin` out of lists, and `basic` and `ldap` out of the same list).
 */
const listable: Readonly<Record<string, { kind: CredentialKind; challenge: string }>> = {
  jwt: { kind: 'bearer', challenge: bearerChallenge },
  basic: { kind: 'basic', challenge: basicChallenge },
  ldap: { kind: 'basic', challenge: basicChallenge },
  apikey: { kind: 'apikey', challenge: apiKeyChallenge },
};

/** The kind of credentials the request carries, 'several' when more than one, or null for none. */
function credentialsOf(req: IncomingMessage): CredentialKind | 'several' | null {
  const authorization = req.headers.authorization;
  let kind: CredentialKind | null = null;
  if (authorization !== undefined) {
    // Node keeps one of two Authorization fields: which one a scheme saw must not depend on that.
    if (req.headersDistinct.authorization!.length > 1) return 'several';
    // RFC 9110 section 11.1: the auth-scheme is compared without case.
    const scheme = /^[^ ]*/.exec(authorization)![0].toLowerCase();
    if (scheme === 'bearer') kind = 'bearer';
    else if (scheme === 'basic') kind = 'basic';
  }
  if (req.headers.apikey === undefined) return kind;
  return kind === null ? 'apikey' : 'several';
}

/**
 * A list of schemes (`auth: ['jwt', 'apikey']`): the one whose credentials the request carries decides,
 * and its refusal is final, never a cue to try the next (a stolen key must not be tried against every
 * scheme, and a bad token must not be excused by a good password). A request with credentials of no
 * listed scheme is refused with one challenge per scheme; so is one with credentials of two kinds at
 * once, whatever they are worth: the gateway would vouch for one while the upstream may read the other.
 * @param members the schemes in the order listed, each reading credentials of a kind of its own
 * @throws Error when a member is not a scheme a list may hold (the config check refuses such a list)
 */
export function createSchemeListAuthenticator(members: readonly Authenticator[]): Authenticator {
  const byKind = new Map<CredentialKind, Authenticator>();
  const challenges: string[] = [];
  for (const member of members) {
    const reads = listable[member.scheme];
    if (!reads || byKind.has(reads.kind)) throw new Error(`a list cannot hold ${member.scheme} here`);
    byKind.set(reads.kind, member);
    challenges.push(reads.challenge);
  }
  const refused: AuthResult = Object.freeze({
    ok: false,
    reject: 'unauthorized',
    challenge: Object.freeze(challenges),
    cause: 'no_credentials',
  });
  const ambiguous: AuthResult = Object.freeze({
    ok: false,
    reject: 'unauthorized',
    challenge: Object.freeze(challenges),
    reason: 'several_credentials',
  });
  return {
    scheme: members.map((member) => member.scheme).join('+'),
    authenticate(req, res, path, tracing) {
      const kind = credentialsOf(req);
      if (kind === 'several') return ambiguous;
      const member = kind === null ? undefined : byKind.get(kind);
      if (!member) return refused;
      // The span names the member that decided, of the list it was given.
      tracing?.span.setAttribute('quotagate.auth.scheme', member.scheme);
      return member.authenticate(req, res, path, tracing);
    },
    documentation: {
      // Swagger 2.0: each entry of `security` is an alternative, any one of which admits the request.
      swaggerSecurity: () => {
        const each = members.map((member) => member.documentation.swaggerSecurity());
        return {
          securityDefinitions: Object.assign({}, ...each.map((one) => one.securityDefinitions)) as Record<
            string,
            unknown
          >,
          security: each.flatMap((one) => one.security),
        };
      },
    },
  };
}
