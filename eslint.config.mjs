// Lint: only what the type checker cannot see, and what has bitten servers like this one.
//   no-floating-promises  a promise nobody awaits or hands on (`void` says "on purpose");
//   no-unused-vars        an unused value (tsc's noUnusedLocals covers locals; this adds parameters
//                         and caught errors, `_`-prefixed names exempt).
//   max-len 160           what prettier (width 120) leaves long: comments and code it cannot break;
//                         string, template and regexp literals and URLs are exempt (their text is
//                         the message; splitting it would only hide it from grep).
// Formatting is prettier's (`npm run format:check`), not the linter's.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'build/**',
      'bench/results/**',
      'node_modules/**',
      'models/**',
      'src/kernels/wasm/assembly/**',
      'spec/**',
      'tools/**',
    ],
  },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      'max-len': [
        'error',
        { code: 160, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
);
