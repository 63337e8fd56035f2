import type { Logger } from '../observe/log.js';

/** A part to close, and how its failure to close is named in the log. */
interface Closer {
  name: string;
  close: () => unknown;
}

/**
 * One stack of closers for one process: each part is pushed as it is built, in dependency order (redis →
 * stores → counters and limiter → access log → upstream → gateway → admin → listeners), and `close`
 * closes them in reverse, so that a part closes only once nothing that uses it is left. A charge made as
 * the upstream gives up the answers it still reads thus reaches a limiter that still counts.
 */
export class Closers {
  private readonly stack: Closer[] = [];
  private closing: Promise<void> | null = null;

  constructor(private readonly logger: Logger) {}

  /** Pushes `close`, run after every part pushed later has closed. */
  push(name: string, close: () => unknown): void {
    if (this.closing) throw new Error(`${name} was built while the process closes`);
    this.stack.push({ name, close });
  }

  /**
   * Closes every part, last pushed first, each once the one before it has; a part that fails to close is
   * logged, and the rest still close. Called again, it waits for the same close.
   */
  close(): Promise<void> {
    this.closing ??= this.closeAll();
    return this.closing;
  }

  private async closeAll(): Promise<void> {
    for (const { name, close } of this.stack.splice(0).reverse()) {
      try {
        await close();
      } catch (error) {
        this.logger.error({ err: error, part: name }, 'closing a part failed');
      }
    }
  }
}
