/**
 * The import rules of src/ (docs/architecture.md): `npm run lint` fails on a cycle of imports.
 * Type-only imports count: a cycle of types is a name in the wrong module all the same.
 */
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
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
