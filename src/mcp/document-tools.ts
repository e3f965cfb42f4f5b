import { z } from 'zod';
import { pageOf } from '../modules/agent/answer-model.js';
import { RestChunkContext, RestGrepDocument } from '../rest/routes/document-text.js';
import type { RestCalls } from './rest-calls.js';
import { define, fitting, id, json, limit, maxTextCharacters } from './tool-definition.js';

const chunkFields = z.object({ chunk_index: z.number(), page: z.number().nullable(), content: z.string() });

/** The workspace a document is in, from the argument or the document itself. */
async function workspaceOf(rest: RestCalls, documentId: string, workspaceId: string | undefined) {
  if (workspaceId) return workspaceId;
  return (await rest.json<{ workspace_id: string }>('GET', `/v1/kb/documents/${encodeURIComponent(documentId)}`)).body.workspace_id;
}

const chunkWindow = 100;
/** Windows of chunks one call reads looking for a page: about 2,000 chunks. */
const pageScanWindows = 20;

export const readDocument = define({
  name: 'read_document',
  title: 'Read a document',
  description: `Reads a document's text in order, from a chunk or from a page on, up to ${maxTextCharacters.toLocaleString('en')} characters per call; next_chunk says where to go on (as from_chunk). Use it when search found the right document and you need more than a passage.`,
  input: z.object({
    document_id: id,
    workspace_id: id.optional(),
    from_chunk: z.number().int().min(0).default(0).describe('First chunk to read'),
    from_page: z.number().int().min(1).optional().describe('Read from the first chunk at or after from_chunk that is on this page or later (PDFs)'),
    max_chunks: limit(20, 100),
  }),
  output: z.object({ document_id: z.string(), chunks: z.array(chunkFields), next_chunk: z.number().nullable(), truncated: z.boolean() }),
  operations: [RestChunkContext],
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run({ document_id, workspace_id, from_chunk, from_page, max_chunks }, { rest }) {
    const workspaceId = await workspaceOf(rest, document_id, workspace_id);
    const window = async (start: number, count: number) => {
      const path = `/v1/kb/documents/${encodeURIComponent(document_id)}/chunks/${start}/context`;
      const { body } = await rest.json<{ chunks: { chunk_index: number; content: string; metadata: unknown }[] }>('GET', path, {
        query: { workspace_id: workspaceId, before: 0, after: Math.min(chunkWindow, count - 1) },
      });
      return body.chunks.map((chunk) => ({ chunk_index: chunk.chunk_index, page: pageOf(chunk.metadata), content: chunk.content }));
    };
    let start = from_chunk;
    if (from_page !== undefined) {
      // The first chunk on or after the page, looked for a window at a time from `from_chunk`.
      let found: number | undefined;
      let at = from_chunk;
      for (let windows = 0; found === undefined && windows < pageScanWindows; windows += 1, at += chunkWindow + 1) {
        const chunks = await window(at, chunkWindow + 1).catch((error: unknown) => {
          if (at > 0 && (error as { status?: number }).status === 404) return [];
          throw error;
        });
        found = chunks.find((chunk) => chunk.page !== null && chunk.page >= from_page)?.chunk_index;
        // Past the last chunk: the document has no such page.
        if (found === undefined && chunks.length < chunkWindow + 1) return { document_id, chunks: [], next_chunk: null, truncated: false };
      }
      // Not found within this call's windows: where to go on looking (from_chunk), said as a cut.
      if (found === undefined) return { document_id, chunks: [], next_chunk: at, truncated: true };
      start = found;
    }
    const chunks: z.infer<typeof chunkFields>[] = [];
    let characters = 0;
    let truncated = false;
    let next: number | null = null;
    for (const chunk of await window(start, max_chunks + 1)) {
      if (chunks.length === max_chunks) {
        next = chunk.chunk_index;
        break;
      }
      if (characters + chunk.content.length > maxTextCharacters && chunks.length > 0) {
        truncated = true;
        next = chunk.chunk_index;
        break;
      }
      chunks.push(chunk);
      characters += chunk.content.length;
    }
    return { document_id, chunks, next_chunk: next, truncated };
  },
});

export const chunkContext = define({
  name: 'chunk_context',
  title: 'Passages around a chunk',
  description: 'Returns a chunk with the chunks before and after it, to read a search hit in its context.',
  input: z.object({
    document_id: id,
    workspace_id: id.optional(),
    chunk_index: z.number().int().min(0),
    before: z.number().int().min(0).max(100).default(2),
    after: z.number().int().min(0).max(100).default(2),
  }),
  output: z.object({ document_id: z.string(), chunk_index: z.number(), chunks: z.array(json), truncated: z.boolean() }),
  operations: [RestChunkContext],
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run({ document_id, workspace_id, chunk_index, before, after }, { rest }) {
    const workspaceId = await workspaceOf(rest, document_id, workspace_id);
    const path = `/v1/kb/documents/${encodeURIComponent(document_id)}/chunks/${chunk_index}/context`;
    const { body } = await rest.json<{ document_id: string; chunk_index: number; chunks: { chunk_index: number; content: string; is_target: boolean }[] }>('GET', path, {
      query: { workspace_id: workspaceId, before, after },
    });
    // Cut from the far ends first: the target and its nearest neighbours stay.
    const byDistance = [...body.chunks].sort((a, b) => Math.abs(a.chunk_index - chunk_index) - Math.abs(b.chunk_index - chunk_index));
    const { kept, truncated } = fitting(byDistance);
    return { ...body, chunks: kept.sort((a, b) => a.chunk_index - b.chunk_index), truncated };
  },
});

export const grep = define({
  name: 'grep',
  title: 'Find a pattern in a document',
  description: 'Finds every match of a regular expression (RE2 syntax) in one document, with the chunks that hold them. Use it for exact names, numbers or phrases that search ranks poorly.',
  input: z.object({ document_id: id, workspace_id: id.optional(), pattern: z.string(), case_sensitive: z.boolean().default(false) }),
  output: z.object({ document_id: z.string(), total_matches: z.number(), truncated: z.boolean(), chunks: z.array(json) }),
  operations: [RestGrepDocument],
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run({ document_id, workspace_id, pattern, case_sensitive }, { rest }) {
    const workspaceId = await workspaceOf(rest, document_id, workspace_id);
    const { body } = await rest.json<{ total_matches: number; truncated: boolean; chunks: Record<string, unknown>[] }>(
      'GET',
      `/v1/kb/documents/${encodeURIComponent(document_id)}/grep`,
      { query: { workspace_id: workspaceId, pattern, case_sensitive } },
    );
    return { document_id, total_matches: body.total_matches, truncated: body.truncated, chunks: body.chunks };
  },
});
