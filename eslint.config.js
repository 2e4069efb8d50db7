import { builtinModules } from 'node:module';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The core runs on Web-standard APIs alone (Node, Bun, Deno, Workers; docs/runtimes.md): only the
// CLI, the decision service and the node:http adapter may import Node's modules.
const NODE_MODULES_MESSAGE =
  'the core runs on Web-standard APIs in every runtime (docs/runtimes.md); Node-only code goes in src/cli, src/serve (the decision service, a Node server) or src/adapters/node.ts';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-empty': ['error', { allowEmptyCatch: false }],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**', 'src/serve/**', 'src/adapters/node.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: builtinModules.map((name) => ({ name, message: NODE_MODULES_MESSAGE })),
          patterns: [{ regex: '^node:', message: NODE_MODULES_MESSAGE }],
        },
      ],
      'no-restricted-globals': ['error', { name: 'process', message: 'a Worker has no process: use src/core/host.ts' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    // Node's Redis clients and Fastify hand over and take Buffers; nothing else needs one.
    ignores: [
      'src/cli/**',
      'src/serve/**',
      'src/adapters/node.ts',
      'src/adapters/fastify.ts',
      'src/stores/redis.ts',
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
  {
    // Plain JavaScript that every runtime runs as it is (test/runtimes).
    files: ['test/runtimes/programs/*.{mjs,cjs}'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly', require: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
