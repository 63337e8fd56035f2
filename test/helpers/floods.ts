import { Pool } from 'undici';
import { basicAuth, type TestGateway } from './test-gateway.js';

/**
 * The statuses of GETs of /pets/1 through `gateway` with `key` as Basic credentials, one per header set,
 * 16 at a time on kept-alive connections (a flood of callers), in the order they were answered.
 */
export async function floodStatuses(
  gateway: TestGateway,
  key: string,
  headerSets: ReadonlyArray<Record<string, string>>,
): Promise<number[]> {
  const pool = new Pool(gateway.url, { connections: 16 });
  try {
    const answers: number[] = [];
    let next = 0;
    const worker = async () => {
      while (next < headerSets.length) {
        const headers = { authorization: basicAuth(key), ...headerSets[next++] };
        const { statusCode, body } = await pool.request({ method: 'GET', path: '/pets/1', headers });
        await body.dump();
        answers.push(statusCode);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    return answers;
  } finally {
    await pool.close();
  }
}

/** How many of `answers` were 200, 429, and anything else. */
export const tally = (answers: readonly number[]) => ({
  ok: answers.filter((status) => status === 200).length,
  refused: answers.filter((status) => status === 429).length,
  other: answers.filter((status) => status !== 200 && status !== 429).length,
});

/** `count` header sets naming the tenants `<prefix>-0`, `<prefix>-1`, … in `X-Tenant`. */
export const tenants = (prefix: string, count: number): Array<Record<string, string>> =>
  Array.from({ length: count }, (_, i) => ({ 'x-tenant': `${prefix}-${i}` }));
