/** The methods HTTP semantic conventions name a span by; any other is `HTTP` (and `_OTHER` in attributes). */
export const knownMethods: ReadonlySet<string> = new Set([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'CONNECT',
  'OPTIONS',
  'TRACE',
  'PATCH',
]);
