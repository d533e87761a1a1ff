// `npm run lint`: typescript-eslint with type information; import cycles are checked by
// scripts/check-cycles.mjs (the lint script runs both, then tsc).
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/profiles/**', 'eslint.config.js', 'scripts/*.mjs'] },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A promise nobody awaits or catches loses its error (and, for a stream, its backpressure).
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      'no-control-regex': 'error',
    },
  },
);
