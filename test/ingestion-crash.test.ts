import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kb, serve, stop, type ServerProcess } from './support/cli.js';
import { makeTextPdf, readBenchPdf } from './support/documents.js';
import { createOwnDatabase, migratedDataDir } from './support/server.js';

let dataDir: string;
let env: NodeJS.ProcessEnv;
let database: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-crash-');
  // On PostgreSQL a database of this file's own, so that the killed server's jobs are taken
  // again by its successor, not by a server another test file runs on the shared database.
  if (process.env.DATABASE_URL) database = await createOwnDatabase(process.env.DATABASE_URL);
  // A short lease: on PostgreSQL, jobs of a killed process are taken again once it runs out.
  env = { ...process.env, KB_DATA_DIR: dataDir, KB_LOG_LEVEL: 'error', KB_INGEST_LEASE_SECONDS: '2', ...(database && { DATABASE_URL: database.url }) };
});
afterAll(async () => {
  await database?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

async function api(server: ServerProcess, key: string, method: string, pathname: string, body?: FormData | object) {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  let payload: FormData | string | undefined;
  if (body instanceof FormData) payload = body;
  else if (body) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const response = await fetch(new URL(pathname, server.url), { method, headers, body: payload }).catch((error: unknown) => {
    // A server that stopped answering says why in its own output.
    const { exitCode, signalCode } = server.child;
    throw new Error(`${method} ${pathname}: ${String(error)}; the server (exit ${exitCode}, signal ${signalCode}) printed:\n${server.output().slice(-4000)}`);
  });
  return { status: response.status, body: (await response.json()) as any };
}

describe('ingestion survives a crash', () => {
  it('finishes every document after SIGKILL during processing and a restart; none is lost or stuck', async () => {
    let server = await serve(env);
    try {
      const created = await kb(['users', 'create', '--email', `crash-${randomUUID()}@example.com`, '--name', 'Crash'], env);
      expect(created.code, created.stderr).toBe(0);
      const key = JSON.parse(created.stdout).api_key.raw_key as string;
      const workspace = await api(server, key, 'POST', '/v1/kb/workspaces', { name: 'crash test' });

      const form = new FormData();
      // Long enough to be caught while it is processed, short enough for the restarted server to
      // finish beside the other test files of a CI leg.
      form.append('file', new File([await makeTextPdf(60)], 'ledger.pdf'));
      for (const name of ['sample_pdf_1.pdf', 'sample_pdf_2.pdf', 'sample_pdf_4.pdf']) {
        form.append('file', new File([await readBenchPdf(name)], name));
      }
      for (let index = 0; index < 5; index += 1) form.append('file', new File([`text document ${index}\n\nwith a paragraph`], `note-${index}.txt`));
      const uploaded = await api(server, key, 'POST', `/v1/kb/workspaces/${workspace.body.id}/documents`, form);
      expect(uploaded.status).toBe(202);
      const ids = (uploaded.body as { id: string }[]).map((document) => document.id);
      expect(ids).toHaveLength(9);

      // Kill the server while the PDF is being processed.
      const deadline = Date.now() + 30_000;
      for (;;) {
        const pdf = await api(server, key, 'GET', `/v1/kb/documents/${ids[0]}`);
        if (pdf.body.status === 'processing') break;
        expect(pdf.body.status, 'the PDF finished before the crash could hit it').toBe('queued');
        if (Date.now() > deadline) throw new Error('the PDF never started processing');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await stop(server.child, 'SIGKILL');

      server = await serve(env);
      // The whole test took 32 s alone on two cores, and 44-64 s beside the other test files of a
      // CI leg (ci86); the 238-page 10-K it used before took up to 337 s there.
      const finishDeadline = Date.now() + 300_000;
      let documents: { id: string; filename: string; status: string; page_count: number | null; chunk_count: number }[] = [];
      for (;;) {
        documents = await Promise.all(ids.map(async (id) => (await api(server, key, 'GET', `/v1/kb/documents/${id}`)).body));
        if (documents.every((document) => document.status === 'ready' || document.status === 'failed')) break;
        if (Date.now() > finishDeadline) throw new Error(`stuck: ${JSON.stringify(documents.map((d) => [d.filename, d.status]))}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect(documents.map((document) => document.id)).toEqual(ids);
      for (const document of documents) expect(document.status, document.filename).toBe('ready');
      expect(documents[0]).toMatchObject({ filename: 'ledger.pdf', page_count: 60 });
      expect(documents[0]!.chunk_count).toBeGreaterThan(60);
      const chunks = await api(server, key, 'GET', `/v1/kb/documents/${ids[0]}/chunks?workspace_id=${workspace.body.id}&limit=1000`);
      expect(chunks.body.map((chunk: { chunk_index: number }) => chunk.chunk_index)).toEqual(
        Array.from({ length: documents[0]!.chunk_count }, (_, index) => index),
      );
    } finally {
      await stop(server.child);
    }
  }, 420_000);
});
