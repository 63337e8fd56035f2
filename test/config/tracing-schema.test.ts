import { describe, expect, it } from 'vitest';
import { badConfig, problemsOf } from '../helpers/config-problems.js';

/** The tracing block's rules (src/config/tracing-schema.ts): one bad-config fixture each. */
const rules: Array<[string, string]> = [
  ['tracing-sample-ratio-out-of-range', 'tracing.sampleRatio: must be a number from 0 to 1'],
  ['tracing-endpoint-not-http', 'tracing.endpoint: must be an http(s) URL'],
  [
    'tracing-sampler-unknown',
    'tracing.sampler: must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
  ],
];

describe('the tracing block of the config', () => {
  it.each(rules)('rejects %s with the file, the key path and the reason', async (name, message) => {
    expect(await problemsOf(badConfig(name))).toEqual([`${badConfig(name)}/default.mjs: ${message}`]);
  });
});
