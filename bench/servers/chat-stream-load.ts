import http from 'node:http';

// The load of a streamed row, in its own process: `connections` connections kept alive, each asking for
// a streamed chat completion and the next as soon as the answer has ended, for `seconds`; every answer
// is read to its end, its events counted (each ends with an empty line) and its last checked to be
// `data: [DONE]`. Prints the events and answers read, and the answers that failed, as JSON.
const [url = '', connections = '10', seconds = '5', headerJson = '{}'] = process.argv.slice(2);
const headers = JSON.parse(headerJson) as Record<string, string>;
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(connections) });
const done = Buffer.from('data: [DONE]\n\n');
const lf = 0x0a;
let events = 0;
let answers = 0;
let failed = 0;
let running = true;

/** Reads one streamed answer to its end; resolves with its events, or rejects when it is not whole. */
function stream(): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, headers: { ...headers, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`answered ${res.statusCode}`));
        return;
      }
      let count = 0;
      // An empty line split between two chunks: the previous one ended with LF, this one starts with it.
      let endedWithLf = false;
      // The last bytes of the answer so far, to see its last event.
      let tail: Buffer = Buffer.alloc(0);
      res.on('data', (chunk: Buffer) => {
        if (endedWithLf && chunk[0] === lf) count += 1;
        for (let at = chunk.indexOf('\n\n'); at !== -1; at = chunk.indexOf('\n\n', at + 2)) count += 1;
        endedWithLf = chunk[chunk.length - 1] === lf;
        tail = (chunk.length >= done.length ? chunk : Buffer.concat([tail, chunk])).subarray(-done.length);
      });
      res.on('end', () => (tail.equals(done) ? resolve(count) : reject(new Error('answer cut short'))));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

async function connection(): Promise<void> {
  while (running) {
    try {
      // Not `events += await …`: that reads `events` before the wait, and loses the other loops' counts.
      const read = await stream();
      events += read;
      answers += 1;
    } catch {
      failed += 1;
    }
  }
}

const loops = Array.from({ length: Number(connections) }, connection);
await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
running = false;
await Promise.all(loops);
agent.destroy();
process.stdout.write(`${JSON.stringify({ events, answers, failed })}\n`);
