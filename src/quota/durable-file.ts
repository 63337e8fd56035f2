import { open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';

/**
 * Replaces `file` with `text` so that a crash at any moment leaves either the old or the new content,
 * complete: write a temporary file, fsync it, rename it over `file`, fsync the folder (so the rename
 * itself survives a power cut). On failure the temporary file is removed and `file` is untouched.
 */
export async function writeFileDurably(file: string, text: string): Promise<void> {
  // A name per process: processes sharing a folder must not write into each other's temporary file
  // (writes of one process to one file are serialized by its repository).
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    const handle = await open(temporary, 'w', 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true }).catch(() => undefined);
    throw error;
  }
  const folder = await open(path.dirname(file), 'r');
  try {
    await folder.sync();
  } finally {
    await folder.close();
  }
}

/**
 * The text of `file`, or null when there is no such file.
 * @throws the read's error with its code, for any other failure
 */
export async function readFileIfPresent(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/**
 * Runs the writes of one file one after the other, in the order asked: a write that fails does not stop
 * the ones after it.
 */
export class WriteQueue {
  private last: Promise<unknown> = Promise.resolve();

  run<T>(write: () => Promise<T>): Promise<T> {
    const result = this.last.then(write, write);
    this.last = result.catch(() => undefined);
    return result;
  }

  /** Resolves once every write asked for so far has ended. */
  async drained(): Promise<void> {
    await this.last;
  }
}
