import type { StoredQuota } from '../quota/model.js';
import type { ResetGenerations } from '../quota/quota-index.js';
import { resetGenerationsOf } from '../quota/quota-repository.js';
import type { Definitions } from './ipc-peer.js';
import { NumberedFeed } from './numbered-feed.js';

/**
 * The quota definitions a worker holds as its primary sends them, with the reset generations of
 * applications' counters: they come in one message, so a worker moves to the counters of a reset at
 * the same moment as to the definitions of the same set.
 */
export class DefinitionsFeed extends NumberedFeed<StoredQuota, Definitions> {
  private generations: ResetGenerations = new Map();

  resets(): ResetGenerations {
    return this.generations;
  }

  protected override adopted(definitions: Definitions): void {
    this.generations = resetGenerationsOf(definitions.resets);
  }
}
