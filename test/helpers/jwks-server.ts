import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';

/** A signing key of a test identity provider: its private half, and its public JWK with kid and alg. */
export interface SigningKey {
  privateKey: CryptoKey;
  publicJwk: JWK;
}

/** An RS256 key named `kid`. */
export async function rsaKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return { privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

/** A token signed by `key`, with `claims`, valid for an hour from now unless the claims say otherwise. */
export function signToken(key: SigningKey, claims: JWTPayload): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iat: now, exp: now + 3600, ...claims })
    .setProtectedHeader({ alg: 'RS256', kid: key.publicJwk.kid! })
    .sign(key.privateKey);
}

/**
 * A JWKS endpoint on 127.0.0.1 that counts its requests and can be taken down (500) and back up, or made
 * to hang (it reads a request and never answers it).
 */
export interface JwksServer {
  url: string;
  /** The requests it has answered, good or not. */
  readonly fetches: number;
  /** The path and query of the last request, or null before any. */
  readonly lastPath: string | null;
  keys: JWK[];
  down: boolean;
  /** Requests are read and never answered (until `close`). */
  hanging: boolean;
  /** A document answered instead of the keys (a malformed or huge one), or null. */
  body: string | null;
  close(): Promise<void>;
}

export async function startJwksServer(keys: JWK[]): Promise<JwksServer> {
  let fetches = 0;
  let lastPath: string | null = null;
  const state = { keys, down: false, hanging: false, body: null as string | null };
  const server = createServer((req, res) => {
    fetches += 1;
    lastPath = req.url ?? null;
    if (state.hanging) return;
    if (state.down) {
      res.writeHead(500).end();
      return;
    }
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(state.body ?? JSON.stringify({ keys: state.keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/realms/test/protocol/openid-connect/certs`,
    get fetches() {
      return fetches;
    },
    get lastPath() {
      return lastPath;
    },
    get keys() {
      return state.keys;
    },
    set keys(next) {
      state.keys = next;
    },
    get body() {
      return state.body;
    },
    set body(next) {
      state.body = next;
    },
    get down() {
      return state.down;
    },
    set down(next) {
      state.down = next;
    },
    get hanging() {
      return state.hanging;
    },
    set hanging(next) {
      state.hanging = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * An identity provider for a test: one RS256 key on a JWKS endpoint (stopped by `defer`), the `jwt`
 * settings that trust it, and its tokens for the application `app-a`.
 */
export async function startTestIdentityProvider(defer: (cleanup: () => Promise<void>) => void) {
  const key = await rsaKey('key-1');
  const jwks = await startJwksServer([key.publicJwk]);
  defer(() => jwks.close());
  return {
    key,
    jwks,
    jwt: { jwksUri: jwks.url, issuer: 'idp', audience: 'api' },
    token: (claims: JWTPayload = {}) =>
      signToken(key, { iss: 'idp', aud: 'api', client_id: 'app-a', ...claims }),
  };
}
