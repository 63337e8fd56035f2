/**
 * One byte counter's room as this process knows it, shared by every open exchange charged on the
 * counter: the counter's total as the store last answered it, the bytes charged since without an
 * answer yet, and the bytes the exchanges moved that no charge holds.
 */
export interface KnownRoom<Member> {
  readonly key: string;
  /** The counter's limit (the tightest of the twins that share it), as the last charge gave it. */
  limit: number;
  /** The counter's total as the store last answered it, plus what was added to it since unanswered. */
  total: number;
  /** Bytes charged to the counter whose answer has not come yet. */
  unanswered: number;
  /** Bytes the members moved that no charge holds yet. */
  uncharged: number;
  /**
   * The uncharged bytes at which this process charges: its share of the room it knows of
   * (`limit − total − unanswered`, divided among the live gateways). At or below 0 when none is left.
   */
  allowance: number;
  /** The open exchanges charged on the counter. */
  readonly members: Set<Member>;
}

/**
 * What this process knows of the room left on each byte counter its open exchanges are charged on as
 * their bytes pass (docs/quotas.md, "Counting"): one room per counter, whatever the number of exchanges
 * on it, so that the exchanges share the room rather than each spend all of it. Every byte that passes
 * is taken from the room; a charge moves bytes from `uncharged` to `unanswered`, and its answer gives
 * the counter's new total. The store answers the charges of one counter in the order they were sent
 * (the memory store at once; Redis on one connection per node), so the last answer is the newest total.
 *
 * With several gateways on one counter (Redis), each knows the total as of its last answer, and moves
 * uncharged at most its share of the room it knows of (room ÷ live gateways): so the bytes the others
 * moved since are bounded by their shares.
 */
export class KnownRooms<Member> {
  private readonly rooms = new Map<string, KnownRoom<Member>>();

  /** @param live the gateways that share the counters (1 for a process alone) */
  constructor(private readonly live: () => number = () => 1) {}

  /**
   * Adds `member` to the room of counter `key`, which its admission found holding `total` (null when it
   * said nothing of it): made with it, or brought up to it.
   */
  join(member: Member, key: string, limit: number, total: number | null): KnownRoom<Member> {
    let room = this.rooms.get(key);
    if (room === undefined) {
      room = { key, limit, total: total ?? 0, unanswered: 0, uncharged: 0, allowance: 0, members: new Set() };
      this.rooms.set(key, room);
    } else if (total !== null) {
      room.total = total;
      room.limit = limit;
    }
    room.members.add(member);
    this.share(room);
    return room;
  }

  /**
   * Takes `member` off the room: of what it moved uncharged, `counted` bytes were taken from the room,
   * and `added` are added to the counter now without an answer (its end's charge). A room without
   * members is forgotten: the next exchange on the counter starts from its admission's total.
   */
  leave(room: KnownRoom<Member>, member: Member, counted: number, added: number): void {
    room.uncharged -= counted;
    room.total += added;
    this.share(room);
    room.members.delete(member);
    if (room.members.size === 0 && this.rooms.get(room.key) === room) this.rooms.delete(room.key);
  }

  /** `bytes` passed uncharged: true when this process's uncharged bytes have reached its allowance. */
  passed(room: KnownRoom<Member>, bytes: number): boolean {
    room.uncharged += bytes;
    return room.uncharged >= room.allowance;
  }

  /** Whether the room's uncharged bytes are at its allowance or past it: a charge is due. */
  full(room: KnownRoom<Member>): boolean {
    return room.uncharged >= room.allowance;
  }

  /** A charge of `amount` is sent for a member whose uncharged bytes the room held `counted` of. */
  charging(room: KnownRoom<Member>, counted: number, amount: number): void {
    room.uncharged -= counted;
    room.unanswered += amount;
    this.share(room);
  }

  /**
   * The store answered a charge of `amount`: the counter holds `total` under `limit` (a refused charge's
   * total with its bytes, which are counted all the same), or null when the answer did not say (the
   * bytes are then taken as counted).
   */
  answered(room: KnownRoom<Member>, amount: number, total: number | null, limit: number): void {
    room.unanswered -= amount;
    room.total = total ?? room.total + amount;
    room.limit = limit;
    this.share(room);
  }

  /**
   * The store could not decide a charge of `amount` (unavailable under `store.onError`, out of its
   * memory bound, or failed): its bytes are counted nowhere, so the room stays as it was known, and the
   * next charge waits for another allowance of bytes rather than the next chunk.
   */
  undecided(room: KnownRoom<Member>, amount: number): void {
    room.unanswered -= amount;
    this.share(room);
  }

  /** The rooms held now, for tests and for the count of counters known. */
  get size(): number {
    return this.rooms.size;
  }

  private share(room: KnownRoom<Member>): void {
    room.allowance = (room.limit - room.total - room.unanswered) / Math.max(1, this.live());
  }
}
