import type { FastifyReply, FastifyRequest } from 'fastify';
import { AdminError } from './admin-errors.js';

export function setEtag(reply: FastifyReply, current: { etag: string }): void {
  reply.header('etag', `"${current.etag}"`);
}

/**
 * One member of an entity-tag list (RFC 9110 §8.8.3), and the comma or end after it: `W/` for weak (case
 * matters), then a quoted opaque tag. Members may be empty (`a, , b`), as RFC 9110 §5.6.1 allows.
 */
const listMember = /[ \t]*(?:(W\/)?"([\x21\x23-\x7e\x80-\xff]*)")?[ \t]*(,|$)/y;

/** The entity tags of an `If-Match` list, or null when the field is not a list of entity tags. */
function entityTags(field: string): Array<{ weak: boolean; tag: string }> | null {
  const tags: Array<{ weak: boolean; tag: string }> = [];
  for (let at = 0; ; ) {
    listMember.lastIndex = at;
    const match = listMember.exec(field);
    if (!match) return null;
    if (match[2] !== undefined) tags.push({ weak: match[1] !== undefined, tag: match[2] });
    if (match[3] === '') return tags;
    at = listMember.lastIndex;
  }
}

const changed = () =>
  new AdminError(412, ['the quota has changed since you read it (If-Match does not match its ETag)']);

/**
 * The ETag a write must still find (RFC 9110 §13.1.1), from `If-Match`: undefined when the header is
 * absent or `*`; else the current ETag when the list holds it. If-Match uses the strong comparison, so a
 * weak tag never matches, and a list matches when any member does. A list that does not hold the current
 * ETag, or a field that is not a list of entity tags, is a 412 now; the store checks again as it writes.
 */
export function requiredEtag(request: FastifyRequest, current: { etag: string }): string | undefined {
  const field = request.headers['if-match'];
  if (field === undefined) return undefined;
  if (field.trim() === '*') return undefined;
  const tags = entityTags(field);
  if (!tags?.some(({ weak, tag }) => !weak && tag === current.etag)) throw changed();
  return current.etag;
}
