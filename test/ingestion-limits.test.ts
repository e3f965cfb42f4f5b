import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepeatedScan, makeZipBombDocx, readBenchPdf, upload, waitForDocuments, type DocumentBody } from './support/documents.js';
import { parsingProcessesOf } from './support/processes.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

// Findings of a hostile-user review: documents that held the only ingestion worker of the
// embedded store for minutes, blew up memory, or could not be stopped.

const megabyteWithoutWhitespace = () => {
  let seed = 1;
  return Array.from({ length: 1_000_000 }, () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return String.fromCharCode(97 + Math.floor((seed / 2147483648) * 26));
  }).join('');
};

async function newWorkspace(server: TestServer, user: TestUser, name = 'Limits') {
  return (await createWorkspace(server, user, name)).id;
}

async function uploadOne(server: TestServer, user: TestUser, workspaceId: string, name: string, bytes: Uint8Array | string) {
  const response = await upload(server, user.key, workspaceId, [{ name, bytes }]);
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  return response.body[0] as DocumentBody;
}

async function waitForStatus(server: TestServer, user: TestUser, id: string, status: DocumentBody['status'], timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const document = (await server.request('GET', `/v1/kb/documents/${id}`, { key: user.key })).body as DocumentBody;
    if (document.status === status) return document;
    if (Date.now() > deadline) throw new Error(`document ${id} is ${document.status}, not ${status}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('documents that used to monopolise ingestion', () => {
  let server: TestServer;
  let user: TestUser;
  let workspaceId: string;

  beforeAll(async () => {
    server = await startTestServer();
    user = await server.createUser();
    workspaceId = await newWorkspace(server, user);
  });
  afterAll(() => server.close());

  it('chunks a megabyte of text without whitespace (it never finished before)', { timeout: 120_000 }, async () => {
    const document = await uploadOne(server, user, workspaceId, 'no-spaces.txt', megabyteWithoutWhitespace());
    const [ready] = await waitForDocuments(server, user.key, [document.id], 90_000);
    expect(ready!.status, ready!.error ?? '').toBe('ready');
    expect(ready!.chunk_count).toBeGreaterThan(1000);
    const chunks = await server.request('GET', `/v1/kb/documents/${document.id}/chunks?workspace_id=${workspaceId}&limit=1000`, { key: user.key });
    expect(chunks.status).toBe(200);
    for (const chunk of chunks.body) expect(chunk.token_count).toBeLessThanOrEqual(512);
  });

  it('caps grep at 1,000 matches and says the result is truncated', { timeout: 120_000 }, async () => {
    const [document] = (await server.request('GET', `/v1/kb/workspaces/${workspaceId}/documents`, { key: user.key })).body as DocumentBody[];
    expect(document!.filename).toBe('no-spaces.txt');
    const grep = (pattern: string) =>
      server.request('GET', `/v1/kb/documents/${document!.id}/grep?workspace_id=${workspaceId}&pattern=${encodeURIComponent(pattern)}`, {
        key: user.key,
      });
    // Every character matches: 1,000,000 matches and 23 MB of JSON before the cap.
    const everything = await grep('.');
    expect(everything.status).toBe(200);
    expect(everything.body.total_matches).toBe(1000);
    expect(everything.body.truncated).toBe(true);
    expect(everything.body.chunks.flatMap((chunk: { matches: unknown[] }) => chunk.matches)).toHaveLength(1000);
    expect(everything.text.length).toBeLessThan(5_000_000);
    // This three-letter run turns up 97 times in the document: all are listed.
    const few = await grep('abc');
    expect(few.body.truncated).toBe(false);
    expect(few.body.total_matches).toBe(97);
  });

  it('fails a zip-bomb DOCX with a reason, before unpacking it', { timeout: 120_000 }, async () => {
    const bomb = await makeZipBombDocx(100 * 1024 * 1024);
    expect(bomb.byteLength).toBeLessThan(1024 * 1024);
    const document = await uploadOne(server, user, workspaceId, 'bomb.docx', bomb);
    const [failed] = await waitForDocuments(server, user.key, [document.id], 60_000);
    expect(failed!.status).toBe('failed');
    expect(failed!.error).toBe('the DOCX unpacks to more than the limit of 64 MB');
  });

  it('stops the work on a document at once when it is deleted', { timeout: 180_000 }, async () => {
    // About 1.7 million CJK characters without a space: half a minute of chunking here.
    let seed = 3;
    const slowText = Array.from({ length: 1_700_000 }, () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return String.fromCodePoint(0x4e00 + Math.floor((seed / 2147483648) * 20_000));
    }).join('');
    const slow = await uploadOne(server, user, workspaceId, 'slow.txt', slowText);
    await waitForStatus(server, user, slow.id, 'processing');
    const deletion = await server.request('DELETE', `/v1/kb/documents/${slow.id}`, { key: user.key });
    expect(deletion.status).toBe(204);
    // The embedded store has one worker: had the deleted document's parse gone on, this one
    // would wait for it.
    const started = Date.now();
    const small = await uploadOne(server, user, workspaceId, 'small.txt', 'A small note written after the deletion.');
    const [ready] = await waitForDocuments(server, user.key, [small.id], 120_000);
    expect(ready!.status).toBe('ready');
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('users take turns on the ingestion worker', () => {
  let server: TestServer;
  afterAll(() => server?.close());

  it("processes another user's upload before the rest of one user's backlog", { timeout: 400_000 }, async () => {
    server = await startTestServer({ KB_INGEST_CONCURRENCY: '1' });
    const busy = await server.createUser();
    const other = await server.createUser();
    const busyWorkspace = await newWorkspace(server, busy, 'Backlog');
    const otherWorkspace = await newWorkspace(server, other, 'Notes');
    // A web page of over 256 KB, most of it script, so that it is claimed alone; its text makes
    // about 40 chunks, still being embedded when the note arrives. The five parts are small and
    // would be claimed together.
    const script = `<script>${'var figures = [1, 2, 3, 4, 5, 6, 7, 8];\n'.repeat(7000)}</script>`;
    const sections = Array.from({ length: 400 }, (_, index) => `<p>Section ${index} of the report records the figures of its quarter, region by region.</p>`);
    const report = `<html><head><title>Report</title>${script}</head><body><h1>Report</h1>${sections.join('\n')}</body></html>`;
    expect(report.length).toBeGreaterThan(256 * 1024);
    const backlog = await upload(server, busy.key, busyWorkspace, [
      { name: 'report.html', bytes: report },
      ...Array.from({ length: 5 }, (_, index) => ({ name: `part-${index}.txt`, bytes: `Part ${index}. ${'Backlog text. '.repeat(400)}` })),
    ]);
    expect(backlog.status).toBe(202);
    const note = await uploadOne(server, other, otherWorkspace, 'note.txt', 'One short note from another user.');
    // One document at a time, beside the other test files of a CI leg on a slow machine.
    const backlogDone = await waitForDocuments(server, busy.key, backlog.body.map((document: DocumentBody) => document.id), 300_000);
    const [noteDone] = await waitForDocuments(server, other.key, [note.id]);
    expect(noteDone!.status).toBe('ready');
    // Served in arrival order, the note would come after all six; taking turns, it comes
    // right after the document being processed when it arrived.
    const readyAfterNote = backlogDone.filter((document) => document.updated_at > noteDone!.updated_at);
    expect(readyAfterNote.length).toBeGreaterThanOrEqual(4);
  });
});

describe('long documents give way to other users between batches', () => {
  /** A text of `sentences` distinct sentences, about 20 tokens each. */
  const ledger = (name: string, sentences: number) =>
    Array.from({ length: sentences }, (_, index) => `Entry ${index} of ledger ${name}: ${(index * 7) % 97} crates reached depot ${index % 13} on day ${index % 365}.`).join(' ');

  it("readies another user's note while one user's two long documents are still being embedded, and counts no attempt for it", { timeout: 300_000 }, async () => {
    // Short chunks, so that each document has many batches to embed; both ingestion workers (the
    // default two) take one of them.
    const server = await startTestServer({ KB_CHUNK_TOKENS: '64', KB_CHUNK_OVERLAP_TOKENS: '0', KB_INGEST_TURN_SECONDS: '0.5' });
    try {
      const busy = await server.createUser();
      const other = await server.createUser();
      const busyWorkspace = await newWorkspace(server, busy, 'Ledgers');
      const otherWorkspace = await newWorkspace(server, other, 'Notes');
      const long = await upload(server, busy.key, busyWorkspace, [
        { name: 'ledger-a.txt', bytes: ledger('A', 4500) },
        { name: 'ledger-b.txt', bytes: ledger('B', 4500) },
      ]);
      expect(long.status).toBe(202);
      const longIds: string[] = long.body.map((document: DocumentBody) => document.id);
      const read = async (user: TestUser, id: string) => (await server.request('GET', `/v1/kb/documents/${id}`, { key: user.key })).body as DocumentBody;
      // Both are being embedded, each by a worker of its own: without turns, the note could not
      // even be parsed before one of them was ready.
      for (const deadline = Date.now() + 120_000; ; ) {
        const documents = await Promise.all(longIds.map((id) => read(busy, id)));
        if (documents.every((document) => document.stage === 'embedding' && document.embedded_chunks > 0)) break;
        if (Date.now() > deadline) throw new Error(`the long documents did not start embedding: ${JSON.stringify(documents.map(({ stage, embedded_chunks }) => ({ stage, embedded_chunks })))}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }

      const note = await uploadOne(server, other, otherWorkspace, 'note.txt', 'One short note from another user.');
      await waitForStatus(server, other, note.id, 'ready', 120_000);
      const whenNoteReady = await Promise.all(longIds.map((id) => read(busy, id)));
      for (const document of whenNoteReady) {
        expect(document.status, `${document.filename} was ${document.status} when the note was ready`).toBe('processing');
        expect(document.embedded_chunks).toBeLessThan(document.chunk_count);
      }

      // Each goes on from where it gave way, and becomes ready whole.
      const done = await waitForDocuments(server, busy.key, longIds, 240_000);
      for (const document of done) {
        expect(document.status, document.error ?? '').toBe('ready');
        expect(document.chunk_count).toBeGreaterThan(500);
        expect(document.embedded_chunks).toBe(document.chunk_count);
      }
      // A turn given up is not an attempt: each long document took one.
      const jobs = await server.app.db.prisma.$queryRaw<{ attempts: number }[]>`SELECT attempts FROM jobs WHERE document_id = ANY(${longIds}::uuid[])`;
      expect(jobs.map((job) => job.attempts)).toEqual([1, 1]);
      // The metrics count the turns given up.
      const metrics = (await server.request('GET', '/metrics')).text;
      const yielded = /^kb_ingestion_stage_duration_seconds_count\{[^}]*stage="embed",outcome="yielded"\} (\d+)$/m.exec(metrics);
      expect(Number(yielded?.[1])).toBeGreaterThanOrEqual(1);
      // Both are found whole: a passage from the end of each.
      for (const name of ['A', 'B']) {
        const found = await server.request('POST', '/v1/kb/query', { key: busy.key, json: { workspace_id: busyWorkspace, query: `Entry 4499 of ledger ${name}`, mode: 'keyword', top_k: 1 } });
        expect(found.status).toBe(200);
        expect(found.body.results[0].content).toContain(`Entry 4499 of ledger ${name}`);
      }
    } finally {
      await server.close();
    }
  });
});

describe('limits on a parse', () => {
  it('fails a document whose text is longer than the limit', { timeout: 60_000 }, async () => {
    const server = await startTestServer({ KB_MAX_TEXT_CHARACTERS: '5000' });
    try {
      const user = await server.createUser();
      const workspaceId = await newWorkspace(server, user);
      const document = await uploadOne(server, user, workspaceId, 'long.txt', 'Forty characters of text in a sentence. '.repeat(200));
      const [failed] = await waitForDocuments(server, user.key, [document.id]);
      expect(failed!.status).toBe('failed');
      expect(failed!.error).toBe("the document's text is longer than the limit of 5,000 characters");
    } finally {
      await server.close();
    }
  });

  it('fails a parse that takes longer than its time limit, without retrying it', { timeout: 120_000 }, async () => {
    const server = await startTestServer({ KB_PARSE_TIMEOUT_SECONDS: '1', KB_PARSE_TIMEOUT_SECONDS_PER_MB: '0' });
    try {
      const user = await server.createUser();
      const workspaceId = await newWorkspace(server, user);
      const document = await uploadOne(server, user, workspaceId, 'report.pdf', await readBenchPdf('lyft_2021.pdf'));
      const [failed] = await waitForDocuments(server, user.key, [document.id]);
      expect(failed!.status).toBe('failed');
      expect(failed!.error).toBe('parsing took longer than the limit of 1 s for a file of this size');
    } finally {
      await server.close();
    }
  });

  it('fails a parse that needs more memory than its worker may use, and serves on', { timeout: 120_000 }, async () => {
    // The text limit is raised out of the way: within the default one the text would be refused
    // for its length before the parse ran out of memory.
    const server = await startTestServer({ KB_PARSE_MEMORY_MB: '128', KB_MAX_TEXT_CHARACTERS: '100000000' });
    try {
      const user = await server.createUser();
      const workspaceId = await newWorkspace(server, user);
      const lines = 'A line of a very long plain text file, repeated many times over.\n'.repeat(600_000);
      const document = await uploadOne(server, user, workspaceId, 'huge.txt', lines);
      const [failed] = await waitForDocuments(server, user.key, [document.id]);
      expect(failed!.status).toBe('failed');
      expect(failed!.error).toBe('parsing needed more than the memory limit of 128 MB');
      const next = await uploadOne(server, user, workspaceId, 'next.txt', 'The worker came back for the next document.');
      const [ready] = await waitForDocuments(server, user.key, [next.id]);
      expect(ready!.status).toBe('ready');
    } finally {
      await server.close();
    }
  });

  it('fails a file whose parser crashes, after its attempts, and serves on: the crash ends a parsing process, not the server', { timeout: 180_000 }, async () => {
    const server = await startTestServer();
    try {
      const user = await server.createUser();
      const workspaceId = await newWorkspace(server, user);
      const document = await uploadOne(server, user, workspaceId, 'scan.pdf', await makeRepeatedScan(4));
      // A fault in native code, as a hostile file could cause in PDF rendering or OCR: each time
      // the scan is being read, its parsing process (a child of this test process, where the
      // server runs) is sent SIGSEGV.
      let crashes = 0;
      let status: DocumentBody | undefined;
      for (const deadline = Date.now() + 150_000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 100))) {
        status = (await server.request('GET', `/v1/kb/documents/${document.id}`, { key: user.key })).body as DocumentBody;
        if (status.status === 'failed' || status.status === 'ready') break;
        if (status.stage === 'ocr') {
          for (const pid of parsingProcessesOf(process.pid)) process.kill(pid, 'SIGSEGV');
          crashes += 1;
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      }
      expect(status).toMatchObject({ status: 'failed' });
      expect(status!.error).toMatch(/^parse failed after 3 attempts: the parsing process ended (while it read the file|before it was ready) \(signal SIGSEGV\)/);
      expect(crashes).toBeGreaterThanOrEqual(3);
      const next = await uploadOne(server, user, workspaceId, 'next.txt', 'The parser came back for the next document.');
      const [ready] = await waitForDocuments(server, user.key, [next.id]);
      expect(ready!.status).toBe('ready');
    } finally {
      await server.close();
    }
  });
});
