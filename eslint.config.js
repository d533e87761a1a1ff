// `npm run lint`: typescript-eslint with type information, plus import cycles (eslint-plugin-import-x).
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/profiles/**', 'eslint.config.js'] },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base, importX.flatConfigs.typescript],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    settings: { 'import-x/resolver-next': [importX.createNodeResolver({ extensions: ['.ts', '.js'], extensionAlias: { '.js': ['.ts', '.js'] } })] },
    rules: {
      // A promise nobody awaits or catches loses its error (and, for a stream, its backpressure).
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      // Cycles of value imports (import-x skips `import type`, which leaves nothing behind at run time).
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'no-control-regex': 'error',
    },
  },
);
