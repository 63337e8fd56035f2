/** Exit codes of every command: 0 ok, 1 runtime failure, 2 bad usage or bad config. */
export const exitCode = { ok: 0, failure: 1, usage: 2 } as const;
