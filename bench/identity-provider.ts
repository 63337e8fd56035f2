import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

/** What the jwt scheme of a bench gateway is configured with (`jwt` in its config). */
export interface JwtSettings {
  jwksUri: string;
  issuer: string;
  audience: string;
}

/** The bench's identity provider: its JWKS on 127.0.0.1, and one token it signed for the bench's client. */
export interface IdentityProvider {
  settings: JwtSettings;
  /** The Authorization header every request of the jwt row carries, as a client repeating its token. */
  authorization: string;
  close(): Promise<void>;
}

const issuer = 'https://idp.bench.invalid/realms/bench';
const audience = 'pets-api';

/**
 * Makes an ES256 key at start (none is ever written down), serves its public half as a JWKS from this
 * process, and signs one token valid for `hours` (longer than the bench runs: an expired token would be
 * refused mid-run).
 */
export async function startIdentityProvider(hours = 3): Promise<IdentityProvider> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const kid = 'bench-key';
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }] });
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const now = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({ client_id: 'bench-app', sub: 'bench-user' })
    .setProtectedHeader({ alg: 'ES256', kid })
    .setIssuer(issuer)
    .setAudience(audience)
    .setIssuedAt(now)
    .setExpirationTime(now + hours * 3600)
    .sign(privateKey);
  return {
    settings: { jwksUri: `http://127.0.0.1:${port}/realms/bench/certs`, issuer, audience },
    authorization: `Bearer ${token}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
