import { readFileSync } from 'node:fs';

/**
 * The local addresses sockets listen on at `port`, as /proc/net/tcp and tcp6 write them (hex):
 * `0100007F` is 127.0.0.1, `00000000` every IPv4 interface.
 */
export function listeningAddresses(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((table) =>
    readFileSync(table, 'utf8')
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((fields) => fields[3] === '0A' && fields[1]?.endsWith(`:${hexPort}`))
      .map((fields) => fields[1]!.split(':')[0]!),
  );
}
