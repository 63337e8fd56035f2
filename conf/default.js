// The configuration `npm start` runs: the seed's format (see README, "Configuration").
// This checkout commits no secret: the keys and the admin password come from the environment, and
// `gateway start --demo` makes up a development key and an admin password for the run when they are
// unset. A project made with `gateway init` has its own generated keys in its conf/default.js instead.
module.exports = {
  // The demo listens where its banner says, on this machine only; the container image sets
  // QUOTAGATE_HOST=0.0.0.0 so that `docker run -p 8080:8080 -p 127.0.0.1:8081:8081` reaches both listeners.
  host: process.env.QUOTAGATE_HOST ?? '127.0.0.1',
  port: 8080,
  APIKeyAuthType: 'basic',
  apikey_development: process.env.APIKEY_DEVELOPMENT,
  apikey_production: process.env.APIKEY_PRODUCTION,
  admin: {
    host: process.env.QUOTAGATE_HOST ?? '127.0.0.1',
    port: 8081,
    users: process.env.QUOTAGATE_ADMIN_PASSWORD
      ? [{ username: 'admin', password: process.env.QUOTAGATE_ADMIN_PASSWORD, role: 'admin' }]
      : [],
  },
  store: { type: 'memory', file: 'data/quotas.json' },
  apis: [
    {
      id: '5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10',
      name: 'Pet Store',
      basePath: '/pets',
      // `gateway start --demo` runs its demo upstream on this port: DEMO_UPSTREAM_PORT moves both.
      upstream: `http://127.0.0.1:${process.env.DEMO_UPSTREAM_PORT ?? 9000}/pets`,
      methods: [
        { id: '8b0e6c1a-3f47-4f0e-a2f5-6d9c1e7b4a21', name: 'listPets', verb: 'GET', path: '/' },
        { id: 'c4d2a9e3-71b8-4c6f-9e0d-2a5b8f1c3d32', name: 'getPet', verb: 'GET', path: '/{petId}' },
        { id: 'e7a3b5c9-0d14-4b2e-8f6a-9c1d3e5f7a43', name: 'addPet', verb: 'POST', path: '/' },
      ],
    },
  ],
  applications: [],
  // A quota at work from the first request, so that the demo shows what quotagate is for: the project's
  // own key (the one `--demo` prints) may call getPet 5 times in any 10 seconds; the 6th call answers 429
  // with Retry-After, and every answer says what is left in its RateLimit field. Declared here, it is
  // read-only in the console (Quotas, badge conf/); Live usage shows it count.
  quotas: [
    {
      id: '6f9c2b1e-8d4a-4c3f-9e2b-7a1d5c8e3f40',
      type: 'APPLICATION',
      name: 'Demo: getPet for the project key',
      application: 'project',
      restrictions: [
        {
          api: '5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10',
          method: 'c4d2a9e3-71b8-4c6f-9e0d-2a5b8f1c3d32',
          type: 'throttle',
          config: { messages: 5, per: 10, period: 'seconds' },
        },
      ],
    },
  ],
};
