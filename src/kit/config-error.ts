/** The config cannot be used; `problems` are complete lines such as `conf/default.js: port: is required`. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(problems.join('\n'));
    this.name = 'ConfigError';
  }
}
