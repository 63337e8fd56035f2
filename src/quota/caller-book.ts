/**
 * Which callers each restriction counted `by` caller counts apart, so that memory stays bounded whatever
 * the number of client addresses or header values, and a flood of new ones cannot take it from the
 * callers already counted (see docs/quotas.md, "Counting by caller"):
 * - a restriction counts at most `capacity` callers apart (over all its applications); a caller is held
 *   from its first request until it has been idle for the restriction's window (at least `leastIdleMs`),
 *   when its counter has expired too;
 * - a new caller beyond the capacity is counted on the restriction's overflow count (one per application),
 *   shared by every caller beyond it: it gets the restriction's limit together with them, then 429;
 * - a held caller is never dropped to make room, so its count is never evicted or reset.
 */
export class CallerBook {
  /** For each restriction (its counter prefix), each caller held and when it was last counted. */
  private readonly held = new Map<string, Map<string, number>>();
  /** When each full restriction was last searched for idle callers: at most once per `sweepEveryMs`. */
  private readonly sweptAt = new Map<string, number>();

  constructor(
    private readonly now: () => number,
    private readonly capacity = callersPerRestriction,
  ) {}

  /**
   * The caller to count a request of `caller` on: `caller` itself when it is held or there is room, else
   * `overflowCaller`.
   * @param restriction the restriction's counter prefix
   * @param idleMs how long the restriction's counts last (its window)
   */
  counted(restriction: string, caller: string, idleMs: number): string {
    const now = this.now();
    let callers = this.held.get(restriction);
    if (!callers) this.held.set(restriction, (callers = new Map()));
    if (
      callers.has(caller) ||
      callers.size < this.capacity ||
      this.sweep(restriction, callers, idleMs, now)
    ) {
      callers.set(caller, now);
      return caller;
    }
    return overflowCaller;
  }

  /** The caller a request of `caller` would be counted on, as `counted` says, without holding it. */
  countedAs(restriction: string, caller: string): string {
    const callers = this.held.get(restriction);
    return !callers || callers.has(caller) || callers.size < this.capacity ? caller : overflowCaller;
  }

  /** Drops the callers idle for longer than `idleMs`; whether that made room. */
  private sweep(restriction: string, callers: Map<string, number>, idleMs: number, now: number): boolean {
    if (now - (this.sweptAt.get(restriction) ?? -Infinity) < sweepEveryMs) return false;
    this.sweptAt.set(restriction, now);
    const idleSince = now - Math.max(idleMs, leastIdleMs);
    for (const [caller, lastSeen] of callers) if (lastSeen <= idleSince) callers.delete(caller);
    return callers.size < this.capacity;
  }
}

/** Callers one restriction counts apart, in this gateway. */
export const callersPerRestriction = 10_000;
/** The caller every caller beyond the capacity is counted as: no client address or header value spells it. */
export const overflowCaller = 'overflow';
/** Concurrency restrictions have no window: their callers are held at least this long. */
const leastIdleMs = 60_000;
const sweepEveryMs = 1_000;
