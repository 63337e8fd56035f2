import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Where `gateway start` writes its process id, for `gateway reload` (relative to the project folder). */
export const defaultPidFile = 'data/gateway.pid';

/** Writes this process's id; the file is removed by `removePidFile` when the gateway stops. */
export function writePidFile(file: string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${process.pid}\n`);
}

/** Removes the file if it still names this process (another gateway may have started since). */
export function removePidFile(file: string): void {
  if (readPidFile(file) === process.pid) rmSync(file, { force: true });
}

/** The process id in the file, or null when there is no such file or it holds no id. */
export function readPidFile(file: string): number | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}
