import type { CodegenConfig } from '@graphql-codegen/cli';

// Types the GraphQL documents in src/ and test/ against the committed SDL, and writes the
// persisted-operation manifest that the REST layer executes by hash.
const config: CodegenConfig = {
  schema: 'schema/schema.graphql',
  documents: ['src/**/*.ts', 'test/**/*.ts', '!src/generated/**'],
  ignoreNoDocuments: false,
  emitLegacyCommonJSImports: false,
  generates: {
    'src/generated/graphql/': {
      preset: 'client',
      presetConfig: {
        fragmentMasking: false,
        persistedDocuments: { mode: 'embedHashInDocument', hashAlgorithm: 'sha256' },
      },
      config: {
        scalars: { DateTime: 'string', JSON: 'unknown' },
        useTypeImports: true,
        enumsAsTypes: true,
      },
    },
  },
};

export default config;
