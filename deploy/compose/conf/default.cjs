// The config of the two gateways of deploy/compose.yaml, mounted over /app/conf. It holds no secret:
// the key and the admin password hash come from the environment that compose.yaml passes on (from
// deploy/.env), which is why this is JavaScript and not YAML. `.cjs` because the image's package.json
// makes plain .js files ES modules.
module.exports = {
  port: 8080,
  APIKeyAuthType: 'basic',
  // compose.yaml runs the gateways with NODE_ENV=production, so this is the project's key.
  apikey_production: process.env.APIKEY_PRODUCTION,
  admin: {
    // Inside the container, so that the published port reaches it; compose.yaml publishes it on the
    // host's 127.0.0.1 only.
    host: '0.0.0.0',
    port: 8081,
    users: process.env.QUOTAGATE_ADMIN_PASSWORD_HASH
      ? [{ username: 'admin', password: process.env.QUOTAGATE_ADMIN_PASSWORD_HASH, role: 'admin' }]
      : [],
  },
  // One Redis for both gateways: they share quota definitions and counters, so limits hold for the pair.
  store: { type: 'redis', url: 'redis://redis:6379', prefix: 'quotagate:', onError: 'local' },
  apis: [
    {
      id: '5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10',
      name: 'Pet Store',
      basePath: '/pets',
      upstream: 'http://upstream:9000/pets',
      methods: [
        { id: '8b0e6c1a-3f47-4f0e-a2f5-6d9c1e7b4a21', name: 'listPets', verb: 'GET', path: '/' },
        { id: 'c4d2a9e3-71b8-4c6f-9e0d-2a5b8f1c3d32', name: 'getPet', verb: 'GET', path: '/{petId}' },
        { id: 'e7a3b5c9-0d14-4b2e-8f6a-9c1d3e5f7a43', name: 'addPet', verb: 'POST', path: '/' },
      ],
    },
  ],
  applications: [],
};
