import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * How a target process answers the requests of the API (and `/healthz`, 200 unless it hangs):
 * - `answer`: 200 `from <pid>`, but a path that holds `hold` is held until told;
 * - `503`: 503 `down`;
 * - `hang`: accepts every request and never answers it (held until told, like `hold`), `/healthz` too.
 */
export type TargetBehaviour = 'answer' | '503' | 'hang';

/** A pool target that is a process of its own, as real ones are: it can be killed, or stop listening. */
export interface TargetProcess {
  url: string;
  pid: number;
  /** Requests of the API it received, in order (their paths). */
  received: string[];
  /** Health checks that are over (read, or given up on by the checker: `hang`) since it started. */
  checksClosed(): number;
  /** Requests it holds now, unanswered and still open. */
  held(): number;
  /** Answers every request it holds with 200 `late from <pid>`. */
  answerHeld(): void;
  /** Stops listening (new connections are refused) while the process lives on. */
  stopListening(): Promise<void>;
  /** Kills the process with SIGKILL (no FIN sent by it: the kernel resets its connections). */
  kill(): Promise<void>;
}

/** The target's program: it tells the test on stdout of what it does, and takes orders on stdin. */
const program = `
const http = require('node:http');
const behaviour = process.argv[1];
const held = new Set();
const server = http.createServer((req, res) => {
  if (req.url === '/healthz') {
    // Each check on a connection of its own, closed once read: the checker is done with it then.
    req.socket.once('close', () => process.stdout.write('check closed\\n'));
    if (behaviour !== 'hang') res.writeHead(200, { connection: 'close' }).end('ok');
    return;
  }
  process.stdout.write('got ' + req.url + '\\n');
  if (behaviour === 'hang' || req.url.includes('hold')) {
    held.add(res);
    res.on('close', () => { if (held.delete(res)) process.stdout.write('released\\n'); });
    process.stdout.write('held\\n');
    return;
  }
  if (behaviour === '503') return void res.writeHead(503, { 'content-type': 'text/plain' }).end('down');
  res.writeHead(200, { 'content-type': 'text/plain' }).end('from ' + process.pid);
});
server.listen(0, '127.0.0.1', () => process.stdout.write('port ' + server.address().port + '\\n'));
require('node:readline').createInterface({ input: process.stdin }).on('line', (order) => {
  if (order === 'answer') for (const res of [...held]) { held.delete(res); res.end('late from ' + process.pid); }
  // The listening socket closes at once; connections open stay until their requests end.
  if (order === 'close') { server.close(); process.stdout.write('closed\\n'); }
});
`;

/** Starts a target process on an ephemeral port of 127.0.0.1; `defer` kills it after the test, by its pid. */
export async function spawnTarget(
  defer: (cleanup: () => Promise<void> | void) => void,
  behaviour: TargetBehaviour = 'answer',
): Promise<TargetProcess> {
  const child = spawn(process.execPath, ['-e', program, behaviour], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  defer(async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
    await exited;
  });
  const received: string[] = [];
  let holding = 0;
  let checksClosed = 0;
  const waiters: Array<{ line: string; done: () => void }> = [];
  const port = new Promise<number>((resolve, reject) => {
    child.once('exit', () => reject(new Error('the target process exited before it listened')));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('port ')) resolve(Number(line.slice(5)));
      else if (line.startsWith('got ')) received.push(line.slice(4));
      else if (line === 'held') holding += 1;
      else if (line === 'released') holding -= 1;
      else if (line === 'check closed') checksClosed += 1;
      for (const waiter of waiters.filter((w) => w.line === line)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.done();
      }
    });
  });
  const url = `http://127.0.0.1:${await port}`;
  return {
    url,
    pid: child.pid!,
    received,
    checksClosed: () => checksClosed,
    held: () => holding,
    answerHeld: () => {
      holding = 0;
      child.stdin!.write('answer\n');
    },
    stopListening: () =>
      new Promise<void>((resolve) => {
        waiters.push({ line: 'closed', done: resolve });
        child.stdin!.write('close\n');
      }),
    kill: async () => {
      process.kill(child.pid!, 'SIGKILL');
      await exited;
    },
  };
}
