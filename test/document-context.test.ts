import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upload, waitForDocuments, type DocumentBody } from './support/documents.js';
import type { Prisma } from '../src/generated/prisma/client.js';
import { readBack, search, type RetrievalDependencies } from '../src/modules/retrieval/service.js';
import type { IndexSearch, IndexSearchResult } from '../src/modules/retrieval/vector-index.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

// Filings of two companies over three years, written from one template: what tells them apart
// is mostly who and when, which the file names say and each page does not.
let server: TestServer;
let user: TestUser;
let workspaceId: string;
const idOf: Record<string, string> = {};

const companies = [
  { file: 'HARBORLIGHTFREIGHT', name: 'Harbor Light Freight Lines, Inc.' },
  { file: 'QUILLSTONE', name: 'Quillstone Paper Company' },
];
const years = [2019, 2020, 2021];

function filing(company: (typeof companies)[number], year: number, index: number) {
  const capex = 1_000 + 137 * index;
  return [
    `# Annual report\n\n${company.name} annual report on Form 10-K for the fiscal year ${year}.`,
    '## Risk factors\n\nDemand for our products depends on general economic conditions, fuel prices and the weather in our markets.',
    '## Liquidity and capital resources\n\nWe fund operations from cash on hand and operating cash flows. We expect to keep investing in equipment.',
    `## Cash flow statement\n\nPurchases of property, plant and equipment: ${capex} million. Dividends paid: ${200 + index} million.`,
  ].join('\n\n');
}

beforeAll(async () => {
  server = await startTestServer();
  user = await server.createUser();
  workspaceId = (await createWorkspace(server, user.key, 'filings')).id;
  const files = companies.flatMap((company, c) => years.map((year, y) => ({ name: `${company.file}_${year}_10K.md`, bytes: filing(company, year, c * years.length + y) })));
  const uploaded = await upload(server, user.key, workspaceId, files);
  expect(uploaded.status).toBe(202);
  for (const document of await waitForDocuments(server, user.key, uploaded.body.map((document: DocumentBody) => document.id))) {
    expect(document.status, `${document.filename}: ${document.error}`).toBe('ready');
    idOf[document.filename] = document.id;
  }
}, 300_000);

afterAll(() => server?.close());

const chunkIdOf = async (documentId: string, chunkIndex: number) =>
  (await server.app.db.prisma.chunk.findFirstOrThrow({ where: { documentId, chunkIndex }, select: { id: true } })).id;

describe("a chunk's document context", () => {
  it('puts the filing a question names by company and fiscal year first (hybrid and keyword; vector alone: the company)', async () => {
    for (const mode of ['hybrid', 'keyword', 'vector']) {
      for (const [company, year] of [
        ['Harbor Light Freight', 2020],
        ['Quillstone', 2021],
        ['Quillstone', 2019],
      ] as const) {
        const response = await server.request('POST', '/v1/kb/query', {
          key: user.key,
          json: { workspace_id: workspaceId, query: `What were ${company}'s FY${year} purchases of property, plant and equipment?`, top_k: 3, mode },
        });
        expect(response.status, response.text).toBe(200);
        const wanted = `${company === 'Quillstone' ? 'QUILLSTONE' : 'HARBORLIGHTFREIGHT'}_${year}_10K.md`;
        // The embedding tells companies apart, but not reliably one year from the next.
        if (mode === 'vector') expect(response.body.results[0].filename.split('_')[0], `${mode}: ${company} ${year}`).toBe(wanted.split('_')[0]);
        else expect(response.body.results[0].filename, `${mode}: ${company} ${year}`).toBe(wanted);
        // Results show the chunk's own text, not what it was indexed with.
        expect(response.body.results[0].content).toMatch(/^Cash flow statement/);
      }
    }
  });

  it("searches a question wrapped in instructions by the question, not by the instructions' words", async () => {
    const question = "What were Quillstone's FY2021 purchases of property, plant and equipment?";
    const instructions =
      'Please base the answer on how we fund operations from cash on hand and operating cash flows and keep investing. Round your answer to whole millions of cash on hand. Use the liquidity and capital resources of operations.';
    for (const mode of ['hybrid', 'keyword']) {
      const response = await server.request('POST', '/v1/kb/query', { key: user.key, json: { workspace_id: workspaceId, query: `${question} ${instructions}`, top_k: 3, mode } });
      expect(response.status, response.text).toBe(200);
      expect(response.body.results[0].filename, mode).toBe('QUILLSTONE_2021_10K.md');
      expect(response.body.results[0].content, mode).toMatch(/^Cash flow statement/);
    }
  });

  it("gives the ranking's document prior the file name's words as the text spells them, not the title", async () => {
    const search = await server.request('POST', '/v1/kb/query', { key: user.key, json: { workspace_id: workspaceId, query: 'Harbor Light Freight 2020 dividends', top_k: 1 } });
    expect(search.body.results[0].filename).toBe('HARBORLIGHTFREIGHT_2020_10K.md');
    const [read] = await readBack(server.app.db.query, workspaceId, [await chunkIdOf(search.body.results[0].document_id, search.body.results[0].chunk_index)]);
    expect(read!.documentName).toBe('Harbor Light Freight 2020 10K');
    expect(search.body.results[0].metadata.title).toBe('Annual report');
  });

  it("shows the document's title (here its first heading) in results' metadata, and filters on it", async () => {
    const search = (filter?: unknown) =>
      server.request('POST', '/v1/kb/query', { key: user.key, json: { workspace_id: workspaceId, query: 'dividends paid', top_k: 10, filter } });
    const all = await search();
    expect(all.status, all.text).toBe(200);
    expect(all.body.results.length).toBeGreaterThan(0);
    for (const result of all.body.results) expect(result.metadata.title).toBe('Annual report');
    expect((await search({ title: 'Annual report' })).body.results).toHaveLength(all.body.results.length);
    expect((await search({ title: { in: ['Annual report', 'Other'] } })).body.results).toHaveLength(all.body.results.length);
    expect((await search({ title: 'Quarterly report' })).body.results).toEqual([]);
  });

  // The pgvector index holds each chunk's document name beside its keyword postings; Elasticsearch does not.
  const namesHeld = !process.env.ELASTICSEARCH_URL;

  /** A hybrid search through the service, with the store's chunk rows counted; `held: false` hides the names the index holds. */
  async function hybridSearch(query: string, held: boolean) {
    const retrieval = server.app.retrieval;
    let chunksRead = 0;
    let documentOf: IndexSearchResult['documentOf'];
    const dependencies: RetrievalDependencies = {
      ...retrieval,
      query: async <Row>(statement: Prisma.Sql) => {
        const rows = await retrieval.query<Row>(statement);
        if (statement.sql.includes('FROM chunks c JOIN documents d')) chunksRead += rows.length;
        return rows;
      },
      index: new Proxy(retrieval.index, {
        get: (index, property) => {
          if (property !== 'search') return Reflect.get(index, property, index);
          return async (request: IndexSearch, signal?: AbortSignal) => {
            const found = await index.search(request, signal);
            documentOf = found.documentOf;
            return held ? found : { ...found, documentOf: undefined };
          };
        },
      }),
    };
    const results = await search(dependencies, { userId: user.id, workspaceIds: null }, { query, workspaceId, topK: 3, mode: 'hybrid' });
    return { results: results.map((result) => [result.filename, result.chunkIndex, result.score]), chunksRead, documentOf };
  }

  /**
   * The same chunks in the same order, with the same scores to 6 digits: chunks still outside the
   * vector graph are scored another way than once merged into it (about 1e-7 apart), and a merge
   * may move them between two searches.
   */
  function expectSameResults(question: string, actual: (string | number)[][], expected: (string | number)[][]) {
    expect(actual.map(([filename, chunkIndex]) => [filename, chunkIndex]), question).toEqual(expected.map(([filename, chunkIndex]) => [filename, chunkIndex]));
    actual.forEach(([, , score], rank) => expect(score, question).toBeCloseTo(expected[rank]![2] as number, 6));
  }

  const questions = [
    "What were Harbor Light Freight's FY2020 purchases of property, plant and equipment?",
    'Quillstone 2019 dividends paid',
    'How do we fund operations?',
  ];

  it('reorders a hybrid search by the document names the index holds, reading only the chunks shown, as it would by reading its pool', async () => {
    for (const question of questions) {
      const fromMemory = await hybridSearch(question, true);
      const fromStore = await hybridSearch(question, false);
      expect(fromMemory.documentOf !== undefined, question).toBe(namesHeld);
      expectSameResults(question, fromMemory.results, fromStore.results);
      expect(fromMemory.results, question).toHaveLength(3);
      // The pool is every chunk of the workspace here (24, under the prior's 30).
      expect(fromStore.chunksRead, question).toBe(24);
      expect(fromMemory.chunksRead, question).toBe(namesHeld ? 3 : 24);
    }
  });

  it("follows a document's rename into the names held, once its chunks are indexed again", async () => {
    const id = idOf['QUILLSTONE_2019_10K.md']!;
    const renamed = await server.request('PATCH', `/v1/kb/documents/${id}`, { key: user.key, json: { filename: 'QUILLSTONE_2017_10K.md' } });
    expect(renamed.status, renamed.text).toBe(200);
    for (const deadline = Date.now() + 60_000; ; ) {
      const document = (await server.request('GET', `/v1/kb/documents/${id}`, { key: user.key })).body as DocumentBody;
      if (document.embedded_chunks === document.chunk_count) break;
      if (Date.now() > deadline) throw new Error(`not embedded again: ${JSON.stringify(document)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // Every chunk's document name as held is the one the store gives a search now.
    const { documentOf } = await hybridSearch('Quillstone', true);
    const chunkIds = (await server.app.db.prisma.chunk.findMany({ where: { document: { workspaceId } }, select: { id: true } })).map((chunk) => chunk.id);
    const stored = await readBack(server.app.db.query, workspaceId, chunkIds);
    expect(stored).toHaveLength(24);
    expect(stored.filter((chunk) => chunk.documentName.includes('2017')).map((chunk) => chunk.documentName)).toEqual(Array(4).fill('QUILLSTONE 2017 10K'));
    if (namesHeld) for (const chunk of stored) expect(documentOf!(chunk.id)).toEqual({ documentId: chunk.documentId, documentName: chunk.documentName });
    for (const question of ["What were Quillstone's FY2017 purchases of property, plant and equipment?", ...questions]) {
      const fromMemory = await hybridSearch(question, true);
      const fromStore = await hybridSearch(question, false);
      expectSameResults(question, fromMemory.results, fromStore.results);
      expect(fromMemory.chunksRead, question).toBe(namesHeld ? 3 : 24);
    }
    expect((await hybridSearch("What were Quillstone's FY2017 purchases of property, plant and equipment?", true)).results[0]![0]).toBe('QUILLSTONE_2017_10K.md');
  }, 90_000);
});
