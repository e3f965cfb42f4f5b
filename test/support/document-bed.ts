import { expect } from 'vitest';
import { createWorkspace } from './fixtures.js';
import { upload, waitForDocuments, type DocumentBody } from './documents.js';
import { startTestServer, type TestServer, type TestUser } from './server.js';

/** What the documents module's test files share: a server with small uploads and chunks, its owner and a workspace. */
export type DocumentBed = { server: TestServer; owner: TestUser; workspaceId: string };

export type ChunkBody = {
  document_id: string;
  chunk_index: number;
  content: string;
  token_count: number;
  metadata: { page: number | null; pages: number[]; headings: string[]; ocr?: true; ocrConfidence?: number };
};

export async function startDocumentBed(): Promise<DocumentBed> {
  const server = await startTestServer({ KB_MAX_UPLOAD_BYTES: String(2 * 1024 * 1024), KB_CHUNK_TOKENS: '200', KB_CHUNK_OVERLAP_TOKENS: '20' });
  const owner = await server.createUser();
  return { server, owner, workspaceId: (await createWorkspace(server, owner)).id };
}

/** The bed's helpers, reading it when called (test files set it up in beforeAll). */
export function documentHelpers(bed: () => DocumentBed) {
  /** A new workspace of the user (the owner by default). */
  const newWorkspace = async (user?: TestUser) => (await createWorkspace(bed().server, user ?? bed().owner)).id;

  /** Uploads the files as the owner and waits until each is ready or failed. */
  async function ingest(files: { name: string; bytes: Uint8Array | string }[], workspace = bed().workspaceId) {
    const { server, owner } = bed();
    const response = await upload(server, owner.key, workspace, files);
    expect(response.status, JSON.stringify(response.body)).toBe(202);
    return waitForDocuments(server, owner.key, (response.body as DocumentBody[]).map((document) => document.id));
  }

  async function chunksOf(document: DocumentBody) {
    const { server, owner } = bed();
    const response = await server.request('GET', `/v1/kb/documents/${document.id}/chunks?workspace_id=${document.workspace_id}&limit=1000`, { key: owner.key });
    expect(response.status).toBe(200);
    return response.body as ChunkBody[];
  }

  return { newWorkspace, ingest, chunksOf };
}
