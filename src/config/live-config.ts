import type { LoadedConfig } from './load-config.js';
import type { Config } from './schema.js';

/**
 * The config a process runs now: the one it started with until a reload replaces it. Parts that read
 * the config while serving (the admin listener's users, the catalog it documents, the Quota API's
 * catalog rules) read it here, or listen for the change.
 */
export class LiveConfig {
  private listeners: Array<(loaded: LoadedConfig) => void> = [];

  constructor(private loaded: LoadedConfig) {}

  get current(): LoadedConfig {
    return this.loaded;
  }

  get config(): Readonly<Config> {
    return this.loaded.config;
  }

  replace(next: LoadedConfig): void {
    this.loaded = next;
    for (const listener of this.listeners) listener(next);
  }

  onChange(listener: (loaded: LoadedConfig) => void): void {
    this.listeners.push(listener);
  }
}
