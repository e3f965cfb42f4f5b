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
  stage: 'queued' | 'parsing' | 'embedding' | 'ready' | 'failed';
  error: string | null;
  page_count: number | null;
  chunk_count: number;
  embedded_chunks: number;
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

/** makeDocx's document with its XML edited by `edit` (to put characters in it that docx would escape). */
export async function editedDocx(edit: (documentXml: string) => string): Promise<Uint8Array> {
  const { unzipSync, zipSync, strFromU8, strToU8 } = await import('fflate');
  const parts = unzipSync(await makeDocx());
  parts['word/document.xml'] = strToU8(edit(strFromU8(parts['word/document.xml']!)));
  return zipSync(parts);
}

/**
 * A DOCX that unpacks to about `unpackedBytes` of XML (a zip bomb): a real document whose body
 * paragraph is repeated, deflated as it is written, so the bomb is never whole in memory.
 */
export async function makeZipBombDocx(unpackedBytes: number): Promise<Uint8Array> {
  const { Zip, ZipDeflate, unzipSync, strFromU8, strToU8 } = await import('fflate');
  const parts = unzipSync(await makeDocx());
  const documentXml = strFromU8(parts['word/document.xml']!);
  const bodyStart = documentXml.indexOf('<w:body>') + '<w:body>'.length;
  const bodyEnd = documentXml.indexOf('<w:sectPr');
  const paragraph = '<w:p><w:r><w:t>' + 'All work and no play makes a zip bomb. '.repeat(20) + '</w:t></w:r></w:p>';
  const output: Uint8Array[] = [];
  const zip = new Zip((error, data) => {
    if (error) throw error;
    output.push(data);
  });
  for (const [name, bytes] of Object.entries(parts)) {
    const entry = new ZipDeflate(name, { level: 6 });
    zip.add(entry);
    if (name !== 'word/document.xml') {
      entry.push(bytes, true);
      continue;
    }
    entry.push(strToU8(documentXml.slice(0, bodyStart)));
    const block = strToU8(paragraph.repeat(Math.ceil((1024 * 1024) / paragraph.length)));
    for (let written = 0; written < unpackedBytes; written += block.length) entry.push(block);
    entry.push(strToU8(documentXml.slice(bodyEnd)), true);
  }
  zip.end();
  return new Uint8Array(Buffer.concat(output));
}
