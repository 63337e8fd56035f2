// The seed's sample authentication plugin: a request passes when its X-Secret header equals the
// `secret` of the project configuration. Use it with:
//   APIKeyAuthType: 'plugin', APIKeyAuthPlugin: './examples/plugins/x-secret.js', secret: '<a long random value>'
const { createHash, timingSafeEqual } = require('node:crypto');

const digest = (value) => createHash('sha256').update(String(value), 'utf8').digest();

class XSecretPlugin {
  /** The top-level config keys this plugin reads: the gateway refuses any other key it does not know. */
  static configKeys = ['secret'];

  /** @param server `{ config, logger }`, before the gateway starts listening. */
  constructor(server) {
    const secret = server.config.secret;
    if (typeof secret !== 'string' || secret.length < 16) {
      throw new Error('config key `secret` must be a string of at least 16 characters');
    }
    this.secret = secret;
    this.expected = digest(secret);
    this.logger = server.logger;
  }

  /** Every URL is validated by this plugin. */
  matchURL() {
    return true;
  }

  /** Synchronous form: true when X-Secret matches (compared in constant time). */
  validateRequest(req) {
    const offered = req.headers['x-secret'];
    return typeof offered === 'string' && timingSafeEqual(digest(offered), this.expected);
  }

  /** Swagger 2.0 security, for the API documentation of the admin port. */
  getSwaggerSecurity() {
    return {
      securityDefinitions: {
        'X-Secret': {
          type: 'apiKey',
          name: 'X-Secret',
          in: 'header',
          description: 'The shared secret of the project',
        },
      },
      security: [{ 'X-Secret': [] }],
    };
  }

  /** Adds the credential to a test request of the (admin-only) API documentation console. */
  applyCredentialsForTest(options) {
    options.headers = { ...options.headers, 'X-Secret': this.secret };
  }
}

module.exports = XSecretPlugin;
