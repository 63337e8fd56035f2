/**
 * The import rules of src/ (docs/architecture.md): `npm run lint` fails on a cycle of imports and on an
 * import that runs up the layers below. Type-only imports count: a cycle or an upward import of types
 * is a name in the wrong module all the same.
 *
 * The layers, bottom first: a module may import its own layer and the layers below it, never one above.
 * The few imports allowed against the order are listed below with their reasons.
 */
const layers = [
  ['kit', '^src/(kit|init|demo)/'],
  ['observe', '^src/observe/'],
  ['contract', '^src/console/logic/'],
  ['limiter', '^src/limiter/'],
  ['quota', '^src/quota/'],
  ['applications', '^src/applications/'],
  ['config', '^src/config/'],
  ['catalog', '^src/catalog/'],
  ['redis', '^src/redis/'],
  ['stores', '^src/stores/'],
  ['notifications', '^src/notifications/'],
  ['auth', '^src/auth/'],
  ['upstream', '^src/upstream/'],
  ['gateway', '^src/gateway/'],
  ['reload', '^src/reload/'],
  ['admin', '^src/admin/'],
  ['workers', '^src/workers/'],
  // The only place parts are built (src/runtime/), and `startGateway`, its entry for tests and embedding.
  ['runtime', '^src/(runtime/|server[.]ts$)'],
  ['commands', '^src/commands/'],
  ['cli', '^src/cli[.]ts$'],
];

/**
 * Imports against the order, each named with its reason (docs/architecture.md lists them): a module
 * `from` may import the module `to` of a layer above it, and nothing else above it.
 */
const exceptions = [];

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
    {
      name: 'data-plane-without-admin',
      severity: 'error',
      comment:
        'The data plane run apart from the admin listener (the data-plane thread, a worker process) must not load it: fastify and the OpenAPI libraries would sit in the heap that serves every request (docs/performance.md). buildDataPlane and buildControlPlane live in files of their own for this: give the data plane what it needs from a module below admin/.',
      from: { path: '^src/runtime/(data-plane-thread|worker|data-plane|serving)[.]ts$' },
      to: { path: ['^src/admin/', 'node_modules/(fastify|@fastify)/'], reachable: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
