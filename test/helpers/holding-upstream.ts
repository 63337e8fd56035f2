import type { ServerResponse } from 'node:http';
import { startUpstream, type TestUpstream } from './upstream.js';

/** An upstream that holds every answer until the test lets it go: requests stay in flight meanwhile. */
export interface HoldingUpstream extends TestUpstream {
  /** Answers held now. */
  held(): number;
  /** Answers the oldest held request, `200 done`. */
  answerOne(): void;
  /** Answers every held request. */
  answerAll(): void;
}

export async function startHoldingUpstream(): Promise<HoldingUpstream> {
  const waiting: ServerResponse[] = [];
  const answer = (res: ServerResponse) => {
    if (res.destroyed) return;
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('done');
  };
  const upstream = await startUpstream((_req, res) => {
    waiting.push(res);
    // A request whose client left stops being held.
    res.on('close', () => {
      const at = waiting.indexOf(res);
      if (at !== -1) waiting.splice(at, 1);
    });
  });
  return {
    ...upstream,
    held: () => waiting.length,
    answerOne: () => {
      const res = waiting.shift();
      if (res) answer(res);
    },
    answerAll: () => {
      for (const res of waiting.splice(0)) answer(res);
    },
    close: () => {
      for (const res of waiting.splice(0)) res.destroy();
      return upstream.close();
    },
  };
}
