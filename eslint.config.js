import { builtinModules } from 'node:module';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The core runs on Web-standard APIs alone (Node, Bun, Deno, Workers; docs/runtimes.md): only the
// CLI, the decision service and the node:http adapter may import Node's modules.
const NODE_MODULES_MESSAGE =
  'the core runs on Web-standard APIs in every runtime (docs/runtimes.md); Node-only code goes in src/cli, src/serve (the decision service, a Node server) or src/adapters/node.ts and node-http.ts';

const NODE_BUILTINS = builtinModules.map((name) => ({ name, message: NODE_MODULES_MESSAGE }));
const NODE_PREFIX = { regex: '^node:', message: NODE_MODULES_MESSAGE };

// Each layer under src and the layers it may import (docs/architecture.md, "Layers").
const LAYERS = {
  core: [],
  engine: ['core'],
  algorithms: ['core', 'engine'],
  stores: ['core', 'engine'],
  limiter: ['core', 'engine'],
  http: ['core'],
  dashboard: ['core', 'limiter'],
};

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    // One program for every file, tsconfig.json's: test/package/consumer has a tsconfig of its own that
    // reads the built types, so the nearest-tsconfig project service would need a build first.
    languageOptions: { parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname } },
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      // node:test's test() and describe() return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite'] },
          ],
        },
      ],
      // A list whose items are decided at once or by the store, as src/serve/service.ts's plans are.
      '@typescript-eslint/await-thenable': ['error', { allowMixedPromiseArrays: true }],
      // Passing on what a catch or an abort signal holds is right; a literal non-Error is still refused.
      '@typescript-eslint/prefer-promise-reject-errors': [
        'error',
        { allowThrowingAny: true, allowThrowingUnknown: true },
      ],
      'no-empty': ['error', { allowEmptyCatch: false }],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**', 'src/serve/**', 'src/adapters/node.ts', 'src/adapters/node-http.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: NODE_BUILTINS, patterns: [NODE_PREFIX] }],
      'no-restricted-globals': ['error', { name: 'process', message: 'a Worker has no process: use src/core/host.ts' }],
    },
  },
  // Imports point down (docs/architecture.md, "Layers"); these layers also run on Web-standard APIs alone.
  ...Object.entries(LAYERS).map(([folder, below]) => ({
    files: [`src/${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: NODE_BUILTINS,
          patterns: [
            NODE_PREFIX,
            {
              regex: below.length === 0 ? '^\\.\\./' : `^\\.\\./(?!(${below.join('|')})/)`,
              message: `src/${folder} may import only ${below.length === 0 ? 'its own folder' : below.map((f) => `src/${f}`).join(' and ')} (docs/architecture.md, "Layers")`,
            },
          ],
        },
      ],
    },
  })),
  {
    files: ['src/cli/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+(engine|limiter|stores|algorithms|http|adapters|dashboard)/',
              message: 'the CLI uses the public API: import it from src/index.ts (docs/architecture.md, "Layers")',
            },
          ],
        },
      ],
    },
  },
  // sluice serve is a client of the public API (docs/architecture.md, "Layers"): what src/index.ts and
  // the package's subpaths export (src/adapters/node.ts is sluice/node), and src/core's utilities.
  ...[
    { files: ['src/serve/**/*.ts'], internals: [] },
    {
      // The service feeds the dashboard's recorder by rule and descriptor; the public Dashboard is
      // fed by observed limiters, and has no such entry yet.
      files: ['src/serve/dashboard.ts'],
      internals: ['dashboard/recorder'],
    },
  ].map(({ files, internals }) => ({
    files,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: `^\\.\\./(?!((${['index', 'adapters/node', ...internals].join('|')})\\.js$|core/))`,
              message:
                'src/serve uses the public API: import it from src/index.ts or src/adapters/node.ts, or src/core (docs/architecture.md, "Layers")',
            },
          ],
        },
      ],
    },
  })),
  {
    files: ['src/**/*.ts'],
    // Node's Redis clients and Fastify hand over and take Buffers; nothing else needs one.
    ignores: [
      'src/cli/**',
      'src/serve/**',
      'src/adapters/node.ts',
      'src/adapters/node-http.ts',
      'src/adapters/fastify.ts',
      'src/stores/redis.ts',
      'src/stores/redis-clients.ts',
      'src/engine/batch.ts',
      'src/engine/msgpack.ts',
    ],
    rules: {
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'a Worker has no process: use src/core/host.ts' },
        { name: 'Buffer', message: 'a Worker has no Buffer: use Uint8Array, TextEncoder, btoa' },
      ],
    },
  },
  // A file holds one concern and a function one step (docs/architecture.md, "Size"): lines counted as
  // written, comments and blank lines included.
  {
    files: ['src/**/*.ts'],
    rules: {
      'max-lines': ['error', { max: 400, skipBlankLines: false, skipComments: false }],
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: false, skipComments: false }],
    },
  },
  // The exceptions, each with its reason.
  {
    // driverTwin mirrors the Lua's decideCall step by step, in one function as the Lua is one, so the
    // two read side by side (test/parity checks they agree).
    files: ['src/engine/driver-twin.ts'],
    rules: { 'max-lines-per-function': 'off' },
  },
  {
    // The memory store's state and its hot path (execute) share one closure, whose every access is on
    // the path docs/performance.md measures; split it only with a measurement beside it.
    files: ['src/stores/memory.ts'],
    rules: { 'max-lines-per-function': 'off' },
  },
  {
    // JavaScript outside the TypeScript program: this file, and plain programs every runtime runs as they are.
    files: ['**/*.{js,mjs,cjs}'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['test/runtimes/programs/*.{mjs,cjs}'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly', require: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
