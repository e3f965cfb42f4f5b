// A newcomer's first run: a workspace, a document, a search and a streamed, cited answer.
//   KB_URL=http://127.0.0.1:3000 KB_API_KEY=sk_... npx tsx clients/typescript/examples/ask.ts
import { createClient, unwrap } from '../src/index.js';

const client = createClient({ baseUrl: process.env.KB_URL ?? 'http://127.0.0.1:3000', apiKey: process.env.KB_API_KEY ?? '' });

const workspace = unwrap(await client.POST('/v1/kb/workspaces', { body: { name: `Example ${new Date().toISOString()}` } }));
const [document] = unwrap(
  await client.POST('/v1/kb/workspaces/{id}/documents', {
    params: { path: { id: workspace.id } },
    body: {
      filename: 'osiris.txt',
      content: 'The Osiris reactor at Saclay was a pool-type research reactor. It reached criticality in 1966 and was shut down in 2015.',
    },
  }),
);

// Ingestion runs in the background: wait until the document is ready.
for (;;) {
  const { status, error } = unwrap(await client.GET('/v1/kb/documents/{id}', { params: { path: { id: document!.id } } }));
  if (status === 'ready') break;
  if (status === 'failed') throw new Error(`the document failed: ${error}`);
  await new Promise((resolve) => setTimeout(resolve, 250));
}

const { results } = unwrap(await client.POST('/v1/kb/query', { body: { query: 'When was Osiris shut down?', workspace_id: workspace.id, top_k: 1 } }));
console.log(`best match (${results[0]?.score.toFixed(3)}): ${results[0]?.content}\n`);

for await (const event of client.streamAgent({ message: 'When did Osiris reach criticality?', workspaceIds: [workspace.id] })) {
  if (event.type === 'token') process.stdout.write(event.content);
  if (event.type === 'sources') console.log(`\n\nsources: ${event.sources.map((source) => `${source.filename} p.${source.pages.join(',')}`).join('; ')}`);
  if (event.type === 'done') console.log(`credits used: ${event.creditsUsed}`);
  if (event.type === 'error') console.error(`\nthe run failed: ${event.message}`);
}
