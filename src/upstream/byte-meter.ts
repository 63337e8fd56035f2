/**
 * Hears an exchange's bytes as they pass, while an enforced byte restriction counts them (the gateway's
 * open exchanges, docs/quotas.md "Counting"): each relay tells it after the exchange's counts grew, and
 * it may charge them at once and end the exchange. An exchange no byte restriction counts has none, and
 * its relays do no more per chunk than count.
 */
export interface ByteMeter {
  /**
   * The exchange's byte counts grew. True when more may flow at once; false when the exchange was ended
   * for them (its restriction had no room); or, when they set off a charge that waits for the store, a
   * promise of either, which never rejects: the flow holds until it settles.
   */
  moved(): boolean | Promise<boolean>;
}
