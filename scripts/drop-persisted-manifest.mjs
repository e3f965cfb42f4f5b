// Run after graphql-codegen (npm run codegen): the client preset always writes a manifest of the
// persisted documents, normalised with their fields sorted; the server registers the documents
// themselves (src/rest/routes.ts), so the manifest would be a second, unread copy of them.
import { rmSync } from 'node:fs';

rmSync(new URL('../src/generated/graphql/persisted-documents.json', import.meta.url), { force: true });
