/**
 * The import rules of src/ (docs/architecture.md): `npm run lint` fails on a cycle of imports and on an
 * import that runs up the layers below. Type-only imports count: a cycle or an upward import of types
 * is a name in the wrong module all the same.
 *
 * The layers, bottom first: a module may import its own layer and the layers below it, never one above.
 * The few imports allowed against the order are listed below with their reasons.
 */
const layers = [
  [
    'kit',
    '^src/(clock|deadline|serial-runs|unique-labels|errors|request-id|request-screening|password-hash|secret-redaction|tls-files|added-latency|config-error|normalize-path|exit-codes|pid-file)[.]ts$|^src/(init|demo)/',
  ],
  ['observe', '^src/(log|access-log|metrics|rejection-history)[.]ts$'],
  ['contract', '^src/console/logic/'],
  ['quota', '^src/quota/'],
  ['applications', '^src/applications/'],
  ['config', '^src/config/'],
  ['catalog', '^src/catalog/'],
  ['redis', '^src/redis/'],
  ['stores', '^src/stores/'],
  ['limiter', '^src/limiter/'],
  ['auth', '^src/auth/'],
  ['proxy', '^src/proxy/'],
  ['gateway', '^src/(data-plane|gateway|http-server-options)[.]ts$'],
  ['reload', '^src/reload/'],
  ['admin', '^src/admin/'],
  ['server', '^src/(server|worker-role)[.]ts$'],
  ['workers', '^src/workers/'],
  ['commands', '^src/commands/'],
  ['cli', '^src/cli[.]ts$'],
];

/**
 * Imports against the order, each named with its reason (docs/architecture.md lists them): a module
 * `from` may import the module `to` of a layer above it, and nothing else above it.
 */
const exceptions = [
  {
    layer: 'quota',
    from: '^src/quota/quota-index[.]ts$',
    to: '^src/limiter/counter-store[.]ts$',
    why: "the quota plan is written in the counters' terms (CounterSpec, a type)",
  },
];

const upward = layers.slice(0, -1).flatMap(([name, path], index) => {
  const above = layers.slice(index + 1).map(([, abovePath]) => abovePath);
  const own = exceptions.filter((exception) => exception.layer === name);
  const rule = (suffix, from, to) => ({
    name: `layer-${name}${suffix}`,
    severity: 'error',
    comment: `${name} imports a layer above it (${layers
      .slice(index + 1)
      .map(([aboveName]) => aboveName)
      .join(', ')}): move the name down to where both sides can import it (docs/architecture.md).`,
    from,
    to,
  });
  return [
    rule('', own.length > 0 ? { path, pathNot: own.map((exception) => exception.from) } : { path }, {
      path: above,
    }),
    ...own.map((exception) =>
      rule('-exception', { path: exception.from }, { path: above, pathNot: exception.to }),
    ),
  ];
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'An import cycle means a name lives in the wrong module: move it down to where both sides can import it.',
      from: {},
      to: { circular: true },
    },
    ...upward,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
