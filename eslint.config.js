import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', 'bench/results/', 'test/fixtures/bad-config/syntax-error/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  { languageOptions: { globals: globals.node } },
  { files: ['src/console/browser/**/*.ts'], languageOptions: { globals: globals.browser } },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    files: ['**/*.ts'],
    rules: { '@typescript-eslint/consistent-type-imports': 'error' },
  },
  {
    // The request path's limits (issue 43): files and functions a reader can hold, and time read only
    // through the injected clock.
    files: ['src/gateway/**/*.ts'],
    rules: {
      'max-lines': ['error', { max: 400 }],
      'max-lines-per-function': ['error', { max: 80 }],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'read time through the injected Clock' },
        { object: 'performance', property: 'now', message: 'read time through the injected Clock' },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: "NewExpression[callee.name='Date']", message: 'read time through the injected Clock' },
      ],
    },
  },
  {
    files: ['conf/**/*.js', 'examples/**/*.js', 'test/fixtures/plugins/**/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
