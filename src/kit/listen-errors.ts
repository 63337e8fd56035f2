/** What a failed listen means to the one who configured it, by its error code. */
const meanings: Record<string, string> = {
  EADDRINUSE: 'is in use',
  EACCES: 'needs privileges this process lacks',
};

/**
 * The error of a listener that could not open, in words that name the listener and the settings that
 * move it: `the data plane's port 8080 is in use (EADDRINUSE): set port, or PORT, to another`. Any other
 * error is returned as it is.
 * @param listener how the message names it, with its port (`the admin listener's port 8081`)
 * @param settings the config keys and environment variables that set that port
 */
export function listenError(error: unknown, listener: string, settings: string): unknown {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  const meaning = code === undefined ? undefined : meanings[code];
  if (meaning === undefined) return error;
  return new Error(`${listener} ${meaning} (${code}): set ${settings} to another`, { cause: error });
}
