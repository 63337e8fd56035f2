import type http from 'node:http';
import type { Config } from '../config/schema.js';

/**
 * The options of every listener, data plane and admin alike: the same timeouts (a slowloris client is
 * cut off after `headersTimeout` on either), the same header size, and duplicate fields joined.
 */
export function httpServerOptions(config: Readonly<Config>): http.ServerOptions {
  const { headersTimeout, requestTimeout, keepAliveTimeout, maxHeaderSize, connectionsCheckingInterval } =
    config.server;
  return {
    headersTimeout,
    requestTimeout,
    keepAliveTimeout,
    maxHeaderSize,
    connectionsCheckingInterval,
    // Node keeps the first of two Authorization or Host lines and drops the other unseen; joined, a
    // second credential makes the header malformed (401) and a second Host is seen (400).
    joinDuplicateHeaders: true,
  };
}
