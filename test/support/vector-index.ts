import type { Database } from '../../src/db/database.js';
import { analyze } from '../../src/modules/retrieval/analyzer.js';
import type { VectorIndex } from '../../src/modules/retrieval/vector-index.js';

export const dimensions = 384;
export const model = { model: 'bge-small-en-v1.5-q', dimensions };

/** A unit vector pointing mostly along `axis`, tilted by `tilt` towards axis + 1. */
export function unit(axis: number, tilt = 0): Float32Array {
  const vector = new Float32Array(dimensions);
  vector[axis] = Math.cos(tilt);
  vector[(axis + 1) % dimensions] = Math.sin(tilt);
  return vector;
}

/** mulberry32: the same numbers on every run. */
export function seeded(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Another session holds `table` locked (ACCESS EXCLUSIVE) until the function returned is called,
 * which resolves once that session's transaction has ended.
 */
export async function holdTableLocked(db: Database, table: string): Promise<() => Promise<void>> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holding = db.prisma.$transaction(
    async (tx) => {
      await tx.$executeRawUnsafe(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
      locked();
      await released;
    },
    { timeout: 30_000 },
  );
  await lockTaken;
  return async () => {
    release();
    await holding;
  };
}

export type DocumentTexts = { texts: string[]; vectors: Float32Array[] };

/**
 * Workspaces, documents and chunks written to the store as the ingestion stages leave them
 * (documents `ready`), with each chunk's vector and terms written to an index as the embed stage
 * writes them.
 */
export function indexedDocuments(context: () => { db: Database; userId: string; index: VectorIndex }) {
  /** Every text written to an index so far: what an index whose BM25 statistics cover all of it counts. */
  const indexedTexts: string[] = [];

  async function addDocuments(workspaceId: string, documents: DocumentTexts[], into: VectorIndex = context().index) {
    const prisma = context().db.prisma;
    const documentIds: string[] = [];
    for (const [position, document] of documents.entries()) {
      const row = await prisma.document.create({
        data: { workspaceId, filename: `${position}.txt`, contentType: 'text/plain', sizeBytes: 1, sha256: `${Math.random()}`, status: 'ready' },
      });
      documentIds.push(row.id);
      indexedTexts.push(...document.texts);
      const chunks = await prisma.chunk.createManyAndReturn({
        data: document.texts.map((content, chunkIndex) => ({ documentId: row.id, chunkIndex, content, tokenCount: 1 })),
      });
      await into.upsert(
        chunks.map((chunk) => ({ chunkId: chunk.id, documentId: row.id, workspaceId, embedding: document.vectors[chunk.chunkIndex]!, terms: analyze(chunk.content) })),
      );
    }
    return documentIds;
  }

  async function workspaceWith(name: string, documents: DocumentTexts[]) {
    const { db, userId } = context();
    const workspace = await db.prisma.workspace.create({ data: { userId, name, nameKey: `${name}-${Math.random()}` } });
    return { workspaceId: workspace.id, documentIds: await addDocuments(workspace.id, documents) };
  }

  /** The chunk texts a keyword search finds, best first. */
  async function keywordTexts(through: VectorIndex, workspaceId: string, query: string) {
    const { keyword } = await through.search({ workspaceIds: [workspaceId], terms: analyze(query), limit: 50, excludeDocumentIds: [] });
    const chunks = await context().db.prisma.chunk.findMany({ where: { id: { in: keyword.map((hit) => hit.chunkId) } }, select: { id: true, content: true } });
    const byId = new Map(chunks.map((chunk) => [chunk.id, chunk.content]));
    return keyword.map((hit) => byId.get(hit.chunkId) ?? `missing ${hit.chunkId}`);
  }

  return { indexedTexts, addDocuments, workspaceWith, keywordTexts };
}
