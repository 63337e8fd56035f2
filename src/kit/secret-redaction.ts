/**
 * Redaction of secrets in free text (error messages and stacks), where pino's redaction by field name
 * cannot reach: a plugin that throws `new Error('bad key ' + key)` must not put the key in the log.
 */

export const redactedText = '[REDACTED]';

/** Key names whose values are secrets, in config objects and in request header names. */
const secretName =
  /pass(?:word|wd)?|secret|token|api[-_]?key|credential|private|auth|session|cookie|signature/i;

// `Basic dXNlcjpwdw==`, `Bearer eyJ…`: the scheme stays, the credential goes (a word such as the
// `authentication` of "basic authentication" is not one: it has no digit, symbol or inner capital).
const schemeCredential = /\b(Basic|Bearer|Digest|Negotiate|NTLM)(\s+)([A-Za-z0-9._~+/=-]{4,})/gi;
const credentialLike = (token: string) => /[0-9._~+/=-]/.test(token) || /[A-Z]/.test(token.slice(1));
// `password=hunter2`, `api_key: "k-123"`, `secret 'x'`: the name stays, the value goes. The text is
// client-controlled (a plugin may quote a header), so the pattern must run in linear time: a name
// starts only where a word starts, and the lookahead-and-backreference takes the whole word at once
// (an atomic group), so nothing is tried again on a long run such as `pass-pass-…` with no `=` after it.
const namedValue = /(?<![A-Za-z0-9_-])(?=([A-Za-z0-9_-]+))\1(\s*[:=]\s*["']?|\s+["'])([^\s"',;]{3,})/g;
const secretWord = /pass(?:word|wd)?|secret|token|api[-_]?key|apikey|credential|session|cookie/i;
// Opaque tokens: long runs of key alphabet holding both letters and digits (not UUIDs, which are ids).
const opaqueToken = /[A-Za-z0-9+/_-]{20,}={0,2}/g;
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const looksLikeKey = (run: string) =>
  /[0-9]/.test(run) && /[A-Za-z]/.test(run) && !uuid.test(run) && !run.includes('/');

/** Longer text is cut before it is searched, so that no log line costs more than a bounded search. */
export const longestRedactedText = 4096;

/**
 * A function that replaces every one of `values` (at least 4 characters long) in a text, the longest
 * first. The values are sorted once, for text that is redacted often (every log line).
 */
export function valueRemover(values: readonly string[]): (text: string) => string {
  const longestFirst = values.filter((value) => value.length >= 4).sort((a, b) => b.length - a.length);
  const shortest = longestFirst.length === 0 ? Infinity : longestFirst[longestFirst.length - 1]!.length;
  return (text) => {
    // An access line's path or id is most often shorter than any secret: nothing to search then.
    if (text.length < shortest) return text;
    let result = text;
    // Most lines hold none: `includes` finds that without building the split's array and a new string.
    for (const value of longestFirst) {
      if (result.includes(value)) result = result.split(value).join(redactedText);
    }
    return result;
  };
}

/** `text` with every one of `values` (at least 4 characters long) replaced, the longest first. */
export function withoutValues(text: string, values: readonly string[]): string {
  return valueRemover(values)(text);
}

/**
 * `text` without credential-shaped values: scheme credentials, named values, opaque tokens. Text longer
 * than `longestRedactedText` is cut there first.
 */
export function withoutCredentials(text: string): string {
  const bounded =
    text.length > longestRedactedText ? `${text.slice(0, longestRedactedText)}…[truncated]` : text;
  return bounded
    .replace(schemeCredential, (match, scheme: string, space: string, token: string) =>
      credentialLike(token) ? `${scheme}${space}${redactedText}` : match,
    )
    .replace(namedValue, (match, name: string, separator: string) =>
      secretWord.test(name) ? `${name}${separator}${redactedText}` : match,
    )
    .replace(opaqueToken, (run) => (looksLikeKey(run) ? redactedText : run));
}

/**
 * Config keys that sound secret and are not: the scheme's name, the plugin's location, and the scheme
 * an API or a method names (`auth: 'basic'` would otherwise blank every "basic" of the log).
 */
const notSecret = new Set(['APIKeyAuthType', 'APIKeyAuthPlugin', 'auth']);

/** Every string found under a secret-sounding key of `value`, at any depth (config, plugin keys). */
export function secretValues(value: unknown, underSecretKey = false): string[] {
  if (typeof value === 'string') return underSecretKey ? [value] : [];
  if (Array.isArray(value)) return value.flatMap((item) => secretValues(item, underSecretKey));
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, item]) =>
    secretValues(item, underSecretKey || (secretName.test(key) && !notSecret.has(key))),
  );
}

/**
 * A serialized error (pino's `err`) with secrets (those `withoutSecrets` takes out) and credential-shaped
 * text taken out of its text.
 */
export function redactError<T extends Record<string, unknown>>(
  serialized: T,
  withoutSecrets: (text: string) => string,
): T {
  const clean = (text: string) => withoutCredentials(withoutSecrets(text));
  const result: Record<string, unknown> = { ...serialized };
  const { message, stack } = serialized;
  if (typeof message === 'string') result.message = clean(message);
  if (typeof stack === 'string') {
    // The stack begins with the message; its frames are paths, which must not read as tokens.
    const head = typeof message === 'string' && message !== '' ? stack.indexOf(message) : -1;
    result.stack =
      head === -1
        ? withoutSecrets(stack)
        : stack.slice(0, head) +
          clean(message as string) +
          withoutSecrets(stack.slice(head + (message as string).length));
  }
  for (const [key, value] of Object.entries(serialized)) {
    if (key !== 'message' && key !== 'stack' && typeof value === 'string') result[key] = clean(value);
  }
  return result as T;
}

/**
 * The secrets a credential field's value holds: the value, the token after its scheme (`Bearer tok`),
 * the user and password a Basic credential decodes to, the values of its cookies.
 */
function secretsOfField(name: string, value: string): string[] {
  const secrets = [value];
  const scheme = /^\s*([A-Za-z]+)\s+(\S+)\s*$/.exec(value);
  if (scheme) {
    secrets.push(scheme[2]!);
    if (scheme[1]!.toLowerCase() === 'basic') {
      const decoded = Buffer.from(scheme[2]!, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      secrets.push(decoded);
      if (colon !== -1) secrets.push(decoded.slice(0, colon), decoded.slice(colon + 1));
    }
  }
  if (name === 'cookie') {
    for (const pair of value.split(';')) secrets.push(pair.slice(pair.indexOf('=') + 1).trim());
  }
  return secrets;
}

/** Values of the request fields that carry credentials, by name and those the auth scheme names. */
export function credentialFieldValues(
  headers: Record<string, string | string[] | undefined>,
  alsoNamed: ReadonlySet<string> = new Set(),
): string[] {
  return Object.entries(headers).flatMap(([name, value]) =>
    value !== undefined && (secretName.test(name) || alsoNamed.has(name))
      ? [value].flat().flatMap((one) => secretsOfField(name, one))
      : [],
  );
}

/** Request fields as logged: the value of every field whose name says it carries a credential replaced. */
export function withoutCredentialFields(headers: unknown): unknown {
  if (typeof headers !== 'object' || headers === null) return headers;
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [name, secretName.test(name) ? redactedText : value]),
  );
}
