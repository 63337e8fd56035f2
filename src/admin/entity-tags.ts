import type { FastifyReply, FastifyRequest } from 'fastify';
import type { StoredQuota } from '../quota/model.js';
import { AdminError } from './admin-errors.js';

export function setEtag(reply: FastifyReply, record: StoredQuota): void {
  reply.header('etag', `"${record.etag}"`);
}

/**
 * The ETag a write must find (RFC 9110 §13.1.1), from `If-Match`: undefined when the header is absent or
 * `*`; the current ETag when it is one of those listed. A list without the current ETag is a 412 now.
 */
export function requiredEtag(request: FastifyRequest, current: StoredQuota | undefined): string | undefined {
  const header = request.headers['if-match'];
  if (header === undefined || header.trim() === '*') return undefined;
  const tags = header.split(',').map((tag) => tag.trim().replace(/^W\//, '').replace(/^"|"$/g, ''));
  if (tags.length === 1) return tags[0];
  if (current && tags.includes(current.etag)) return current.etag;
  throw new AdminError(412, ['the quota has changed since you read it (If-Match does not match its ETag)']);
}
