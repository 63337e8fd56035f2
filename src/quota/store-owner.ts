import { readFileSync, rmSync, writeFileSync } from 'node:fs';

/**
 * The memory store's file belongs to the one gateway running on it, which is its only writer: it says
 * so in `<file>.owner` (its process id), so that a command that would write the file too
 * (`gateway quotas import`) can refuse while that gateway runs, however it was started.
 */
const ownerFile = (file: string) => `${file}.owner`;

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Marks `file` as this process's; the returned function unmarks it (if it is still this process's). */
export function claimStoreFile(file: string): () => void {
  writeFileSync(ownerFile(file), `${process.pid}\n`);
  return () => {
    if (storeFileOwner(file) === process.pid) rmSync(ownerFile(file), { force: true });
  };
}

/** The process id of the running gateway that owns `file`, or null when none does. */
export function storeFileOwner(file: string): number | null {
  let text: string;
  try {
    text = readFileSync(ownerFile(file), 'utf8');
  } catch {
    return null;
  }
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 && isAlive(pid) ? pid : null;
}
