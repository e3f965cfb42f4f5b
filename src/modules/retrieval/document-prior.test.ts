import { describe, expect, it } from 'vitest';
import { queryTerms } from './analyzer.js';
import { withDocumentPrior, type CandidateDocument } from './document-prior.js';
import type { IndexHit } from './vector-index.js';

const documents: Record<string, CandidateDocument> = {
  acme2018: { documentId: 'acme2018', documentName: 'Acme 2018 10-K' },
  acme2019: { documentId: 'acme2019', documentName: 'Acme 2019 10-K' },
  globex2018: { documentId: 'globex2018', documentName: 'Globex 2018 10-K' },
};
const documentOfChunk = (chunkId: string) => documents[chunkId.split('#')[0]!];
const rank = (hits: IndexHit[], question: string) => withDocumentPrior(hits, (hit) => documentOfChunk(hit.chunkId), queryTerms(question, 32));

describe('the document prior', () => {
  it("ranks the filing the question names (company and year) above the company's other filings", () => {
    const fused: IndexHit[] = [
      { chunkId: 'acme2019#1', score: 0.9 },
      { chunkId: 'globex2018#1', score: 0.88 },
      { chunkId: 'acme2018#1', score: 0.85 },
      { chunkId: 'acme2019#2', score: 0.5 },
    ];
    const ranked = rank(fused, 'What was Acme revenue in FY2018?');
    expect(ranked[0]!.chunkId).toBe('acme2018#1');
    for (const hit of ranked) expect(hit.score).toBeGreaterThanOrEqual(0), expect(hit.score).toBeLessThanOrEqual(1);
    expect(ranked.map((hit) => hit.score)).toEqual([...ranked.map((hit) => hit.score)].sort((a, b) => b - a));
  });

  it('leaves the order alone when the names tell the candidates nothing apart', () => {
    const fused: IndexHit[] = [
      { chunkId: 'acme2019#1', score: 0.9 },
      { chunkId: 'acme2019#2', score: 0.7 },
      { chunkId: 'acme2019#3', score: 0.4 },
    ];
    expect(rank(fused, 'What was Acme revenue in FY2018?').map((hit) => hit.chunkId)).toEqual(['acme2019#1', 'acme2019#2', 'acme2019#3']);
  });

  it('lets a document with several good passages outrank one lucky passage when the question names neither', () => {
    const fused: IndexHit[] = [
      { chunkId: 'globex2018#1', score: 0.8 },
      { chunkId: 'acme2019#1', score: 0.79 },
      { chunkId: 'acme2019#2', score: 0.78 },
      { chunkId: 'acme2019#3', score: 0.77 },
    ];
    expect(rank(fused, 'How are inventories valued?')[0]!.chunkId).toBe('acme2019#1');
  });

  it('keeps hits whose document is unknown, scaled like the rest', () => {
    const ranked = rank([{ chunkId: 'gone#1', score: 1 }, { chunkId: 'acme2018#1', score: 0.2 }], 'Acme 2018');
    expect(ranked.map((hit) => hit.chunkId).sort()).toEqual(['acme2018#1', 'gone#1']);
    for (const hit of ranked) expect(hit.score).toBeLessThanOrEqual(1);
  });
});
