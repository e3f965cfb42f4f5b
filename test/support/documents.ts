import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Document as DocxDocument, HeadingLevel, Packer, Paragraph } from 'docx';
import type { TestServer } from './server.js';

export const benchPdfDirectory = path.resolve(import.meta.dirname, '../../../shared/bench-data/pdfs');

export const readBenchPdf = (name: string) => readFile(path.join(benchPdfDirectory, name));

export type DocumentBody = {
  id: string;
  workspace_id: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  sha256: string;
  status: 'queued' | 'processing' | 'ready' | 'failed';
  error: string | null;
  page_count: number | null;
  chunk_count: number;
  metadata: Record<string, unknown>;
  created_at: string;
  updated_at: string;
};

/** Uploads files as multipart/form-data parts named `file`, with an optional metadata part. */
export function upload(
  server: TestServer,
  key: string,
  workspaceId: string,
  files: { name: string; bytes: Uint8Array | string }[],
  metadata?: string,
) {
  const form = new FormData();
  for (const file of files) form.append('file', new File([file.bytes as BlobPart], file.name));
  if (metadata !== undefined) form.append('metadata', metadata);
  return fetch(new URL(`/v1/kb/workspaces/${workspaceId}/documents`, server.url), {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: form,
  }).then(async (response) => ({ status: response.status, body: (await response.json()) as any }));
}

/** Polls until every document is ready or failed (the queue works in the background). */
export async function waitForDocuments(server: TestServer, key: string, ids: string[], timeoutMs = 120_000): Promise<DocumentBody[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const documents = await Promise.all(ids.map(async (id) => (await server.request('GET', `/v1/kb/documents/${id}`, { key })).body as DocumentBody));
    if (documents.every((document) => document.status === 'ready' || document.status === 'failed')) return documents;
    if (Date.now() > deadline) throw new Error(`documents still processing: ${JSON.stringify(documents.map((d) => [d.filename, d.status]))}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}


export async function makeDocx(): Promise<Uint8Array> {
  const document = new DocxDocument({
    sections: [
      {
        children: [
          new Paragraph({ text: 'Annual Report', heading: HeadingLevel.HEADING_1 }),
          new Paragraph('The company grew steadily during the year, opening three new offices.'),
          new Paragraph({ text: 'Revenue', heading: HeadingLevel.HEADING_2 }),
          new Paragraph('Revenue rose by twelve percent, driven by subscriptions.'),
        ],
      },
    ],
  });
  return new Uint8Array(await Packer.toBuffer(document));
}
