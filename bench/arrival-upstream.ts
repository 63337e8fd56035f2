import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ArrivalUpstream {
  url: string;
  /** performance.now() of each request's arrival, in milliseconds, in order of arrival. */
  arrivals: number[];
  close(): Promise<void>;
}

const body = Buffer.from('{"ok":true}');

/**
 * An upstream inside the bench process, on an ephemeral port of 127.0.0.1, that answers every request
 * with 200 and records when it arrived: what the gateways let through, whatever the client then saw.
 */
export async function startArrivalUpstream(): Promise<ArrivalUpstream> {
  const arrivals: number[] = [];
  const server = http.createServer((req, res) => {
    arrivals.push(performance.now());
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    arrivals,
    close: () =>
      new Promise((resolve) => {
        // The gateways keep their connections to the upstream alive; close() alone would wait for them.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
