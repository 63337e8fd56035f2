import { beforeDeadline, deadlinePassed } from '../kit/deadline.js';
import type { IpcPeer, IpcRequests } from './ipc-peer.js';

/** How long a worker has to answer; one that misses it is left out of that answer. */
const workerAnswerMs = 2_000;

/**
 * Asks every worker the same question and gathers the answers that came in time: a worker that is
 * stuck or exiting costs the admin listener at most two seconds, never its answer.
 */
export async function askWorkers<K extends keyof IpcRequests>(
  workers: readonly IpcPeer[],
  kind: K,
  body: IpcRequests[K][0],
): Promise<Array<IpcRequests[K][1]>> {
  const answers = await Promise.all(
    workers.map(async (worker) => {
      try {
        const answer = await beforeDeadline(worker.request(kind, body), workerAnswerMs);
        return answer === deadlinePassed ? [] : [answer];
      } catch {
        return [];
      }
    }),
  );
  return answers.flat();
}
