// ESLint (flat config): typescript-eslint's type-aware recommended rules over the sources of every
// workspace (apps/*/src, packages/*/src). Prettier stays the formatter (eslint-config-prettier turns
// off every stylistic rule it owns). Tests, benchmarks and scripts are not linted here: they are
// type-checked by tsconfig.test.json and formatted by Prettier. `npm run lint` runs it with
// --max-warnings 0 (docs/testing.md).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**'] },
  {
    files: ['apps/*/src/**/*.ts', 'packages/*/src/**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked, prettier],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Off: a tool's `run()`, a Fastify plugin or an async route handler implements an interface that
      // returns a Promise; `async` without `await` is how it does so, and it also turns a synchronous
      // throw into a rejection (which Fastify and the tool kit rely on). Rewriting them as non-async
      // functions returning Promise.resolve(...) would change that.
      '@typescript-eslint/require-await': 'off',
      // A `let` assigned once but read (by a closure) before that assignment stays `let`: the
      // start-up code creates the metrics and error handlers that name the queues before the queues.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      'max-lines': ['error', { max: MAX_FILE_LINES }],
      'max-lines-per-function': [
        'error',
        { max: MAX_FUNCTION_LINES, skipBlankLines: true, skipComments: true, IIFEs: true },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
        },
      ],
    },
  },
  {
    // Known findings, to be fixed: the client's raw JSON-RPC view (RpcResponse, onMessage, InputRequest
    // params, ToolInfo.inputSchema) is typed `any` so that its callers, the tests above all, can reach
    // into results; typing it as `unknown` means narrowing in ~20 test files. Only these rules, only here.
    files: ['packages/client/src/rpc.ts', 'packages/client/src/client.ts', 'packages/client/src/wire.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
    },
  },
);
