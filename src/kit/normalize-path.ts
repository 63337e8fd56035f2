/**
 * Normalization of request targets before anything matches them (RFC 3986 §6.2.2): the normalized path
 * is also what goes upstream, so no spelling of a path can reach a method without being matched to it.
 * Spellings that common upstream stacks read differently from one another (and so from the router) are
 * refused rather than guessed at: matrix parameters (Tomcat and Spring strip `;…` from a segment, others
 * keep it), trailing dots and spaces (IIS and Windows stacks strip them), an encoded `%` (stacks that
 * decode twice read `%2566` as `f`), encoded slashes, control characters and invalid UTF-8 (overlong
 * forms such as `%C0%AE` are a `.` to lenient decoders).
 */

export type NormalizedTarget =
  | {
      ok: true;
      /** Non-empty path segments after normalization, still percent-encoded where they must be. */
      segments: string[];
      trailingSlash: boolean;
      /** The query including its leading `?`, or ''. */
      query: string;
    }
  | { ok: false; reason: string };

const fail = (reason: string): NormalizedTarget => ({ ok: false, reason });

// RFC 3986 §2.3: ALPHA / DIGIT / "-" / "." / "_" / "~"
const isUnreserved = (code: number) =>
  (code >= 0x41 && code <= 0x5a) ||
  (code >= 0x61 && code <= 0x7a) ||
  (code >= 0x30 && code <= 0x39) ||
  code === 0x2d ||
  code === 0x2e ||
  code === 0x5f ||
  code === 0x7e;

const hexDigit = /^[0-9A-Fa-f]{2}$/;
/** A path `decodeUnreserved` would give back as it is: unreserved characters and slashes only. */
const plainPath = /^[A-Za-z0-9\-._~/]*$/;

/**
 * Normalizes a request target as received on the request line.
 * @param hostHeader the request's Host, the only host an absolute-form target may name.
 */
export function normalizeTarget(target: string, hostHeader: string | undefined): NormalizedTarget {
  let originForm = target;
  if (!target.startsWith('/')) {
    // RFC 9112 §3.2.2: absolute-form is accepted only when it names this very host.
    const absolute = /^https?:\/\/([^/?#]*)(.*)$/i.exec(target);
    if (!absolute) return fail('the request target must be a path');
    if (!hostHeader || absolute[1]!.toLowerCase() !== hostHeader.toLowerCase()) {
      return fail('the request target names another host');
    }
    originForm = absolute[2]!.startsWith('/') ? absolute[2]! : `/${absolute[2]!}`;
  }
  const queryStart = originForm.indexOf('?');
  const rawPath = queryStart === -1 ? originForm : originForm.slice(0, queryStart);
  const query = queryStart === -1 ? '' : originForm.slice(queryStart);
  // A request target never carries a fragment (RFC 9112 §3.2); clients that do disagree on where it ends.
  if (query.includes('#')) return fail('fragment in request target');
  // Most paths hold nothing to decode or refuse: letters, digits, `-`, `_`, `~`, `.` and slashes.
  const decoded = plainPath.test(rawPath) ? rawPath : decodeUnreserved(rawPath);
  if (typeof decoded !== 'string') return decoded;
  return resolveDotSegments(decoded, query);
}

function decodeUnreserved(rawPath: string): string | NormalizedTarget {
  let out = '';
  let nonAscii = false;
  for (let i = 0; i < rawPath.length; i += 1) {
    const char = rawPath[i]!;
    const code = rawPath.charCodeAt(i);
    if (char === '%') {
      const hex = rawPath.slice(i + 1, i + 3);
      if (!hexDigit.test(hex)) return fail('malformed percent-encoding');
      const byte = parseInt(hex, 16);
      // An encoded "/" or "\" is a path separator to some upstreams and not to us: refuse both.
      if (byte === 0x2f || byte === 0x5c) return fail('encoded slash or backslash in path');
      if (byte === 0x00) return fail('NUL in path');
      if (byte < 0x20 || byte === 0x7f) return fail('encoded control character in path');
      if (byte === 0x25) return fail('encoded percent sign in path');
      if (byte === 0x3b) return fail('matrix parameter in path');
      if (byte >= 0x80) nonAscii = true;
      out += isUnreserved(byte) ? String.fromCharCode(byte) : `%${hex.toUpperCase()}`;
      i += 2;
    } else if (char === '\\') {
      return fail('backslash in path');
    } else if (char === '#') {
      return fail('fragment in request target');
    } else if (char === ';') {
      return fail('matrix parameter in path');
    } else if (code <= 0x20 || code >= 0x7f) {
      return fail('control character in path');
    } else {
      out += char;
    }
  }
  if (nonAscii) {
    const text = decodedUtf8(out);
    if (text === null) return fail('percent-encoding that is not UTF-8');
    if (foldsToAscii.test(text)) return fail('a character that case-insensitive matching reads as ASCII');
  }
  return out;
}

/** The text the escapes of a path (with no `%25` left in it) spell, or null when that is not UTF-8. */
function decodedUtf8(path: string): string | null {
  try {
    return decodeURIComponent(path);
  } catch {
    return null;
  }
}

// Non-ASCII characters whose case mapping is an ASCII letter: the Kelvin sign K is `k`, the long s ſ
// is `S`, the dotless ı is `I`, and İ is `i` and a dot, to Java's equalsIgnoreCase, .NET's ignore-case
// comparisons and JavaScript's toLowerCase: such an upstream could route `/pets/find%E2%84%AAey` to a
// literal the gateway counted as a parameter.
const foldsToAscii = /[\u0130\u0131\u017F\u212A]/u;

/** The segments of `path` (which starts with `/`), dot segments resolved; read in place, no split arrays. */
function resolveDotSegments(path: string, query: string): NormalizedTarget {
  const segments: string[] = [];
  let last = '';
  for (let start = 1; start <= path.length; ) {
    const slash = path.indexOf('/', start);
    const end = slash === -1 ? path.length : slash;
    const segment = path.slice(start, end);
    start = end + 1;
    last = segment;
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (segments.length === 0) return fail('path climbs above the root');
      segments.pop();
      continue;
    }
    if (segment.endsWith('.')) return fail('segment ending in a dot');
    if (segment.endsWith('%20')) return fail('segment ending in a space');
    segments.push(segment);
  }
  const trailingSlash = segments.length > 0 && (last === '' || last === '.' || last === '..');
  return { ok: true, segments, trailingSlash, query };
}

/**
 * Normalizes one literal segment of a configured path the same way request segments are; null when no
 * request could carry it (a `;`, a trailing dot, an encoded `%`, …), so that config can refuse it.
 */
export function normalizeSegment(segment: string): string | null {
  const normalized = normalizeTarget(`/${segment}`, undefined);
  return normalized.ok && normalized.segments.length === 1 && !normalized.trailingSlash
    ? normalized.segments[0]!
    : null;
}

/** A request target's path, without its query: what a log line or a span shows (a query may carry keys). */
export function withoutQuery(target: string): string {
  const query = target.indexOf('?');
  return query === -1 ? target : target.slice(0, query);
}
