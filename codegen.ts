import type { CodegenConfig } from '@graphql-codegen/cli';

// Types the GraphQL documents in src/ and test/ against the committed SDL, and embeds each
// document's sha256 in it: the REST layer registers its operations with Yoga under those hashes
// (src/rest/operations.ts, persistedOperations). The preset also writes the JSON manifest
// persisted-documents.json; nothing reads it, since its documents are normalised with their
// fields sorted, and REST bodies must list fields in the documented order.
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
