import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upload, waitForDocuments, type DocumentBody } from './support/documents.js';
import { readBack } from '../src/modules/retrieval/service.js';
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
});
