import type { CodegenConfig } from '@graphql-codegen/cli';

// Types the GraphQL documents in src/ and test/ against the committed SDL, and embeds each
// document's sha256 in it: the REST layer registers its routes' operations with Yoga under those
// hashes (src/rest/routes.ts, persistedOperations). The preset's JSON manifest
// (persisted-documents.json) is deleted after each run (scripts/drop-persisted-manifest.mjs):
// its documents are normalised with their fields sorted, and REST bodies must list fields in the
// documented order, so the server takes the documents themselves, never the manifest.
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
