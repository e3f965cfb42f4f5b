import { analyze } from './analyzer.js';
import type { IndexHit } from './vector-index.js';

/** A candidate chunk's document as the ranking sees it: its id and its file name's words. */
export type CandidateDocument = { documentId: string; documentName: string };

/** Best fused hits the prior reorders: read back with their documents in the statement that reads the results. */
export const documentPriorPool = 30;

/** Share of a hybrid score that comes from the chunk's document rather than from the chunk. */
export const documentWeight = { name: 0.5, evidence: 0.2 };

/** Chunks of a document counted for its evidence: a document is as relevant as its best few passages. */
const evidenceChunks = 3;

/**
 * Hybrid ranking with a document prior. Among many similar documents (a company's filings of
 * several years), the chunks that match a question best are often in the wrong one: every
 * filing discusses the same line items. Two document-level signals are added to each chunk's
 * fused score:
 *
 * - name: how much of the query the document's file name covers, each query term weighted by how
 *   rare it is among the candidates' names (BM25's idf), so that words every candidate is named
 *   with count for nothing and "3M" with "FY2018" picks 3M's 2018 filing. The file name, not the
 *   title: a name is what tells a company's filings apart, while a title is the document's own
 *   words, which each chunk is already indexed with (`indexedText`); counting a paper's title
 *   again here let topical words outweigh the passages (SciFact, docs/retrieval.md);
 * - evidence: the mean fused score of the document's best three chunks, relative to the best
 *   document's: a document with several good passages outranks one lucky passage elsewhere.
 *
 * Scores stay within 0 and 1. A document prior that cannot tell candidates apart (one document,
 * or names the query does not mention) shifts all chunks alike and leaves their order.
 */
export function withDocumentPrior(fused: readonly IndexHit[], documentOf: (hit: IndexHit) => CandidateDocument | undefined, queryTerms: readonly string[]): IndexHit[] {
  const byDocument = new Map<string, { terms: Set<string>; scores: number[] }>();
  for (const hit of fused) {
    const document = documentOf(hit);
    if (!document) continue;
    let entry = byDocument.get(document.documentId);
    if (!entry) {
      entry = { terms: new Set(analyze(document.documentName)), scores: [] };
      byDocument.set(document.documentId, entry);
    }
    entry.scores.push(hit.score);
  }
  if (byDocument.size === 0) return [...fused];

  const count = byDocument.size;
  const query = [...new Set(queryTerms)];
  const idf = new Map<string, number>();
  for (const term of query) {
    let frequency = 0;
    for (const { terms } of byDocument.values()) if (terms.has(term)) frequency++;
    if (frequency > 0) idf.set(term, Math.log(1 + (count - frequency + 0.5) / (frequency + 0.5)));
  }
  const possible = [...idf.values()].reduce((sum, weight) => sum + weight, 0);

  const evidenceOf = (scores: number[]) => {
    const best = [...scores].sort((a, b) => b - a).slice(0, evidenceChunks);
    return best.reduce((sum, score) => sum + score, 0) / evidenceChunks;
  };
  const bestEvidence = Math.max(...[...byDocument.values()].map(({ scores }) => evidenceOf(scores)));
  const prior = new Map<string, number>();
  for (const [documentId, { terms, scores }] of byDocument) {
    let named = 0;
    for (const [term, weight] of idf) if (terms.has(term)) named += weight;
    const name = possible > 0 ? named / possible : 0;
    const evidence = bestEvidence > 0 ? evidenceOf(scores) / bestEvidence : 0;
    prior.set(documentId, documentWeight.name * name + documentWeight.evidence * evidence);
  }

  const scale = 1 + documentWeight.name + documentWeight.evidence;
  return fused
    .map((hit) => {
      const document = documentOf(hit);
      return { chunkId: hit.chunkId, score: (hit.score + (document ? prior.get(document.documentId)! : 0)) / scale };
    })
    .sort((a, b) => b.score - a.score || (a.chunkId < b.chunkId ? -1 : 1));
}
