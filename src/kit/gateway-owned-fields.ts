/**
 * The HTTP fields a gateway owns: those it frames by, sets or decides on for every request it sends
 * upstream. The proxy (upstream/fields, gateway/rule-set.ts) drops or rewrites them, and the config
 * refuses a setting that would put another value in one (`jwt.forwardClaims`): one list, low enough in
 * the layers for both. Names are lower case.
 */

// RFC 9110 §7.6.1: connection-specific fields, plus the obsolete ones proxies still meet in practice.
export const hopByHopFields = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
] as const;

// RFC 9112 §6: the fields that frame a message body, and the one that names its target.
export const framingFields = ['content-length', 'transfer-encoding', 'host'] as const;

/** The fields in which the gateway tells the upstream the client's address, scheme and host. */
export const forwardedFields = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host'] as const;

/**
 * Fields in which proxies tell the upstream who the client is and how it connected: only a trusted
 * peer's are believed, anyone else's are dropped.
 */
export const peerIdentityFields = [
  'forwarded',
  'x-real-ip',
  'true-client-ip',
  'x-client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
  'x-cluster-client-ip',
  'x-original-forwarded-for',
  'x-forwarded-port',
  'x-forwarded-prefix',
  'x-forwarded-server',
  'x-forwarded-ssl',
  'x-forwarded-scheme',
  'x-url-scheme',
  'front-end-https',
  'x-original-host',
] as const;

/** The request id the gateway sets, and `Expect`, which it answers itself once a request is admitted. */
export const gatewaySetFields = ['x-request-id', 'expect'] as const;

/** The credentials of the schemes, which go upstream only with `forwardCredentials: true`. */
export const credentialFields = ['authorization', 'apikey'] as const;

/** Every field above: a setting may not name one as a field of its own. */
export const gatewayOwnedFields: ReadonlySet<string> = new Set([
  ...hopByHopFields,
  ...framingFields,
  ...forwardedFields,
  ...peerIdentityFields,
  ...gatewaySetFields,
  ...credentialFields,
]);
