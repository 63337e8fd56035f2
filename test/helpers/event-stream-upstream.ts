import type { ServerResponse } from 'node:http';
import { useSuiteUpstream } from './suite-upstream.js';
import { startUpstream, type TestUpstream } from './upstream.js';

export interface EventStreamUpstream {
  upstream: () => TestUpstream;
  /** The event streams it holds open, in the order they were asked for: the test writes and ends them. */
  streams: ServerResponse[];
}

/**
 * A suite's upstream (see `useSuiteUpstream`) that answers a path ending `/stream` with an event stream
 * it holds open, its head sent at once and then `opening` (nothing when empty), and any other path
 * `{"id":1}`.
 */
export function useEventStreamUpstream(opening = ''): EventStreamUpstream {
  const streams: ServerResponse[] = [];
  const upstream = useSuiteUpstream(() =>
    startUpstream((req, res) => {
      if (!req.url?.endsWith('/stream')) {
        res.end('{"id":1}');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      if (opening) res.write(opening);
      streams.push(res);
    }),
  );
  return { upstream, streams };
}
