import { describe, expect, it } from 'vitest';
import { ReplayableBody } from '../../src/upstream/replayable-body.js';

/** A request body as its client sends it, chunk by chunk: it says how far it was read, and whether it was stopped. */
function clientBody(chunks: string[]) {
  const seen = { read: 0, stopped: false };
  async function* source(): AsyncGenerator<Buffer> {
    try {
      for (const chunk of chunks) {
        seen.read += 1;
        yield Buffer.from(chunk);
      }
    } finally {
      seen.stopped = true;
    }
  }
  return { seen, source: source() };
}

/** The first `count` chunks a reader takes (all of them when not said), as text. */
async function take(reader: AsyncGenerator<Buffer>, count = Infinity): Promise<string[]> {
  const taken: string[] = [];
  for await (const chunk of reader) {
    taken.push(chunk.toString());
    if (taken.length >= count) break;
  }
  return taken;
}

describe('a replayable request body', () => {
  it('gives a second reader the body from its start, reading its client once', async () => {
    const { seen, source } = clientBody(['a', 'b', 'c']);
    const body = new ReplayableBody(source, 10);
    expect(await take(body.read(), 2)).toEqual(['a', 'b']);
    expect(body.replayable).toBe(true);
    expect(await take(body.read())).toEqual(['a', 'b', 'c']);
    expect(seen.read).toBe(3);
  });

  it('is no longer replayable once more than its limit was read, and hands on every chunk still', async () => {
    const { source } = clientBody(['1234', '5678', '9']);
    const body = new ReplayableBody(source, 6);
    expect(await take(body.read())).toEqual(['1234', '5678', '9']);
    expect(body.replayable).toBe(false);
  });

  it('stops its client body once no call holds it, and not before', async () => {
    const { seen, source } = clientBody(['a', 'b', 'c']);
    const body = new ReplayableBody(source, 10);
    body.hold();
    body.hold();
    expect(await take(body.read(), 1)).toEqual(['a']);
    body.release();
    expect(seen.stopped).toBe(false);
    body.release();
    await expect.poll(() => seen.stopped).toBe(true);
    expect(seen.read).toBe(1);
  });
});
