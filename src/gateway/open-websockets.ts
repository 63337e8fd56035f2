import type { Clock } from '../kit/clock.js';

/** Milliseconds between two looks at every open WebSocket: its bytes charged, its credentials checked. */
export const webSocketTickMs = 1_000;

/**
 * The WebSockets open on this gateway (their upgrade requests, from the moment they are forwarded until
 * they close), and the tick that looks at each of them once a second while any is open: a long-lived
 * connection is charged and checked as it runs, not only when it ends.
 */
export class OpenWebSockets<T> {
  private readonly open = new Set<T>();
  private timer: unknown = null;

  constructor(
    private readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
    /** Called once a tick with every open WebSocket. */
    private readonly onTick: (open: ReadonlySet<T>) => void,
  ) {}

  get size(): number {
    return this.open.size;
  }

  add(socket: T): void {
    this.open.add(socket);
    this.timer ??= this.timers.setTimeout(this.tick, webSocketTickMs);
  }

  delete(socket: T): void {
    if (!this.open.delete(socket) || this.open.size > 0 || this.timer === null) return;
    this.timers.clearTimeout(this.timer);
    this.timer = null;
  }

  /** Every open WebSocket, for a shutdown to end them. */
  all(): T[] {
    return [...this.open];
  }

  private readonly tick = (): void => {
    this.timer = this.timers.setTimeout(this.tick, webSocketTickMs);
    this.onTick(this.open);
  };
}
