import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { openingHeaders } from '../../../src/upstream/websocket/opening.js';
import { TestExchange } from '../../helpers/upstream-exchanges.js';

/** An exchange of a request that never went over a socket: only its fields are read here. */
const exchangeWith = (fields: Array<string | string[]>): TestExchange => {
  const exchange = new TestExchange({} as IncomingMessage, {} as ServerResponse);
  exchange.upstreamFields.push(...fields);
  return exchange;
};

describe("a WebSocket opening's upstream fields", () => {
  it("are the exchange's, the upstream's Host and the upgrade fields, a repeated name as a list", () => {
    const headers = openingHeaders(
      exchangeWith(['sec-websocket-key', 'k', 'x-forwarded-for', '10.0.0.1', 'x-forwarded-for', '10.0.0.2']),
      'upstream.test:8080',
    );
    expect(headers).toEqual({
      'sec-websocket-key': 'k',
      'x-forwarded-for': ['10.0.0.1', '10.0.0.2'],
      host: 'upstream.test:8080',
      connection: 'Upgrade',
      upgrade: 'websocket',
    });
  });

  it('offer the upstream no compression when a byte restriction counts the exchange (RFC 7692)', () => {
    const offer = ['sec-websocket-key', 'k', 'sec-websocket-extensions', 'permessage-deflate'];
    const counted = exchangeWith(offer);
    counted.countsBytes = true;
    expect(openingHeaders(counted, 'upstream.test')).not.toHaveProperty('sec-websocket-extensions');
    expect(openingHeaders(exchangeWith(offer), 'upstream.test')).toHaveProperty(
      'sec-websocket-extensions',
      'permessage-deflate',
    );
  });
});
