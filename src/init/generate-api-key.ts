import { randomBytes } from 'node:crypto';

/** A fresh API key: 32 random bytes, base64url (43 characters). */
export function generateApiKey(): string {
  return randomBytes(32).toString('base64url');
}
