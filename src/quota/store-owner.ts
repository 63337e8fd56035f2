import { readPidFile, removePidFile, writePidFile } from '../kit/pid-file.js';

/**
 * The memory store's file belongs to the one gateway running on it, which is its only writer: it says
 * so in `<file>.owner` (a pid file), so that a command that would write the file too
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
  writePidFile(ownerFile(file));
  return () => removePidFile(ownerFile(file));
}

/** The process id of the running gateway that owns `file`, or null when none does. */
export function storeFileOwner(file: string): number | null {
  const pid = readPidFile(ownerFile(file));
  return pid !== null && isAlive(pid) ? pid : null;
}
