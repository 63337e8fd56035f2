const base64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Parses an `Authorization: Basic <base64(user:password)>` value strictly (RFC 7617): a
 * case-insensitive scheme name, canonical base64, a colon. Anything else is null. Two Authorization
 * lines are joined into one value (`joinDuplicateHeaders`), which does not parse.
 */
export function parseBasicCredentials(header: string): { username: string; password: string } | null {
  const match = /^basic +([^ ]+) *$/i.exec(header);
  if (!match || !base64.test(match[1]!)) return null;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
