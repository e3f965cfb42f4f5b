/**
 * The search benchmark's data: a store of synthetic chunks made from SciFact's abstracts, written
 * in bulk (see bench/search.ts for how and why), and the abstracts and queries themselves.
 */
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { RunningApp } from '../src/app.js';
import type { PrismaClient } from '../src/generated/prisma/client.js';
import { adminCommands } from '../src/cli/admin-commands.js';
import type { Embedder } from '../src/modules/embeddings/embedder.js';
import { analyze } from '../src/modules/retrieval/analyzer.js';
import type { VectorIndex } from '../src/modules/retrieval/vector-index.js';
import { elapsedSeconds, loadNow, log, progressBar, resultsDir, ServiceClient } from './helpers.js';

export const benchData = path.resolve(import.meta.dirname, '../../shared/bench-data');
const scifactDir = path.join(benchData, 'scifact');
export const cacheDir = path.join(resultsDir, '.cache');

/** Per-dimension standard deviation of the noise added to a chunk's mixed vector (its norm is about 0.1). */
export const NOISE_SIGMA = 0.1 / Math.sqrt(384);
/** Seeding: documents written per createMany, and chunks per index.upsert. */
export const DOCS_PER_WRITE = 50;
export const CHUNKS_PER_UPSERT = 500;
/** Bump when the way chunks are made changes: cached stores of another version are not reused. */
export const GENERATOR_VERSION = 1;

/** Long runs: a line every 10 s, with a rate smoothed over many updates. */
export const searchBars = { everyMs: 10_000, fps: 2, etaBuffer: 2_000 };

/** mulberry32: a small seeded generator, so a cached store and a fresh one hold the same chunks. */
export function random(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const gaussian = () => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next());
  const below = (n: number) => Math.floor(next() * n);
  return { next, gaussian, below };
}

// ---------------------------------------------------------------------------------------------
// The abstracts and their vectors

export type Abstract = { id: string; text: string; sentences: string[] };

export async function readAbstracts(): Promise<Abstract[]> {
  return (await readFile(path.join(scifactDir, 'corpus.jsonl'), 'utf8'))
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const record = JSON.parse(line) as { _id: string; title: string; text: string };
      const sentences = record.text
        .split(/(?<=[.!?])\s+(?=[A-Z0-9(\[])/)
        .map((sentence) => sentence.trim())
        .filter((sentence) => sentence !== '');
      return { id: record._id, text: `${record.title}\n\n${record.text}`, sentences: sentences.length > 0 ? sentences : [record.title] };
    });
}

/** One passage vector per abstract (title + text, as bench:scifact uploads them), cached by model and corpus. */
export async function abstractVectors(embedder: Embedder, abstracts: Abstract[]): Promise<Float32Array[]> {
  const corpusHash = createHash('sha256')
    .update(abstracts.map((abstract) => abstract.text).join('\u0000'))
    .digest('hex')
    .slice(0, 16);
  const file = path.join(cacheDir, `scifact-vectors-${embedder.modelId}-${embedder.dimensions}-${corpusHash}.f32`);
  const dimensions = embedder.dimensions;
  if (existsSync(file)) {
    const bytes = await readFile(file);
    if (bytes.byteLength === abstracts.length * dimensions * 4) {
      const all = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
      log(`abstract vectors: read from ${path.relative(process.cwd(), file)}`);
      return abstracts.map((_, index) => all.slice(index * dimensions, (index + 1) * dimensions));
    }
  }
  log(`abstract vectors: embedding the ${abstracts.length} abstracts once (cached afterwards in ${path.relative(process.cwd(), file)})`);
  const bar = progressBar('embedding abstracts |{bar}| {value}/{total} | {duration_formatted} | eta {eta_formatted}', searchBars);
  bar.start(abstracts.length, 0);
  const vectors: Float32Array[] = [];
  const batch = 32;
  for (let start = 0; start < abstracts.length; start += batch) {
    vectors.push(...(await embedder.embed(abstracts.slice(start, start + batch).map((abstract) => abstract.text), 'passage')));
    bar.update(vectors.length);
  }
  bar.stop();
  const all = new Float32Array(abstracts.length * dimensions);
  vectors.forEach((vector, index) => all.set(vector, index * dimensions));
  await mkdir(cacheDir, { recursive: true });
  await writeFile(file, new Uint8Array(all.buffer));
  return vectors;
}

// ---------------------------------------------------------------------------------------------
// Synthetic chunks

export type SyntheticChunk = { content: string; vector: Float32Array; sources: number };

/**
 * Chunks made from runs of sentences of 2 or 3 abstracts; every chunk text is distinct. Each
 * abstract gives about 1/k of its sentences (so a chunk is about one abstract long), and the
 * vector is the mix of the abstracts' vectors weighted by characters given, plus noise.
 */
export function chunkMaker(abstracts: Abstract[], vectors: Float32Array[], seed: number, seen: Set<string>) {
  const rng = random(seed);
  const dimensions = vectors[0]!.length;
  return (): SyntheticChunk => {
    for (;;) {
      const count = rng.next() < 0.5 ? 2 : 3;
      const picked = new Set<number>();
      while (picked.size < count) picked.add(rng.below(abstracts.length));
      const parts: { text: string; source: number }[] = [];
      for (const source of picked) {
        const sentences = abstracts[source]!.sentences;
        const length = Math.max(1, Math.min(sentences.length, Math.round((sentences.length / count) * (0.6 + 0.8 * rng.next()))));
        const start = rng.below(sentences.length - length + 1);
        parts.push({ text: sentences.slice(start, start + length).join(' '), source });
      }
      const content = parts.map((part) => part.text).join(' ');
      const key = createHash('sha1').update(content).digest('base64');
      if (seen.has(key)) continue;
      seen.add(key);
      const vector = new Float32Array(dimensions);
      for (const part of parts) {
        const weight = part.text.length / content.length;
        const source = vectors[part.source]!;
        for (let d = 0; d < dimensions; d++) vector[d]! += weight * source[d]!;
      }
      let norm = 0;
      for (let d = 0; d < dimensions; d++) {
        vector[d]! += NOISE_SIGMA * rng.gaussian();
        norm += vector[d]! * vector[d]!;
      }
      norm = Math.sqrt(norm);
      for (let d = 0; d < dimensions; d++) vector[d]! /= norm;
      return { content, vector, sources: count };
    }
  };
}

export type Plan = { mainChunks: number; otherWorkspaces: number; otherChunks: number; chunksPerDoc: number };
export type Seeded = { key: string; userId: string; mainWorkspaceId: string; otherWorkspaceIds: string[]; chunks: number; documents: number; seconds: number; chunksPerSecond: number; load: string };


export async function seed(app: RunningApp, index: VectorIndex, plan: Plan, abstracts: Abstract[], vectors: Float32Array[]): Promise<Seeded> {
  const prisma = app.db.prisma;
  const created = await adminCommands['users.create'](prisma, { email: `bench-search-${randomUUID()}@example.com`, name: 'Search benchmark', credits: 0, active: true });
  const api = new ServiceClient(app.url, created.api_key.raw_key);
  const workspace = async (name: string) => (await api.json<{ id: string }>('POST', '/v1/kb/workspaces', { name })).id;
  const mainWorkspaceId = await workspace('search bench: main');
  const otherWorkspaceIds: string[] = [];
  for (let n = 0; n < plan.otherWorkspaces; n++) otherWorkspaceIds.push(await workspace(`search bench: other ${n + 1}`));

  // Batches of documents of every workspace, shuffled: the workspaces grow side by side, as they would.
  const seen = new Set<string>();
  type Task = { workspaceId: string; documents: number; maker: () => SyntheticChunk; label: string };
  const tasks: Task[] = [];
  const plans = [
    { workspaceId: mainWorkspaceId, chunks: plan.mainChunks, seed: 1, label: 'main' },
    ...otherWorkspaceIds.map((workspaceId, n) => ({ workspaceId, chunks: plan.otherChunks, seed: 100 + n, label: `other${n + 1}` })),
  ];
  for (const workspacePlan of plans) {
    const maker = chunkMaker(abstracts, vectors, workspacePlan.seed, seen);
    const documents = Math.ceil(workspacePlan.chunks / plan.chunksPerDoc);
    for (let first = 0; first < documents; first += DOCS_PER_WRITE) {
      tasks.push({ workspaceId: workspacePlan.workspaceId, documents: Math.min(DOCS_PER_WRITE, documents - first), maker, label: workspacePlan.label });
    }
  }
  const order = random(7);
  for (let position = tasks.length - 1; position > 0; position--) {
    const other = order.below(position + 1);
    [tasks[position], tasks[other]] = [tasks[other]!, tasks[position]!];
  }
  const chunkTotal = plans.reduce((sum, p) => sum + p.chunks, 0);
  const remaining = new Map(plans.map((p) => [p.workspaceId, p.chunks]));
  const bar = progressBar('seeding |{bar}| {value}/{total} chunks | {rate} chunks/s | {duration_formatted} | eta {eta_formatted}', searchBars);
  bar.start(chunkTotal, 0, { rate: '-' });
  const start = performance.now();
  let written = 0;
  let documentCount = 0;
  let serial = 0;
  for (const task of tasks) {
    const documents: SyntheticDocument[] = [];
    for (let d = 0; d < task.documents; d++) {
      const left = remaining.get(task.workspaceId)!;
      const count = Math.min(plan.chunksPerDoc, left);
      if (count <= 0) break;
      remaining.set(task.workspaceId, left - count);
      documents.push(syntheticDocument(task.maker, count, `${task.label}-${++serial}.txt`));
    }
    if (documents.length === 0) continue;
    written += await writeDocuments(prisma, index, task.workspaceId, documents);
    documentCount += documents.length;
    bar.update(written, { rate: (written / elapsedSeconds(start)).toFixed(0) });
  }
  const seconds = elapsedSeconds(start);
  bar.stop();
  return {
    key: created.api_key.raw_key,
    userId: created.user.id,
    mainWorkspaceId,
    otherWorkspaceIds,
    chunks: written,
    documents: documentCount,
    seconds,
    chunksPerSecond: written / seconds,
    load: loadNow(),
  };
}

export type SyntheticDocument = { id: string; filename: string; size: number; chunks: { id: string; chunkIndex: number; content: string; vector: Float32Array }[] };

/** A document of `count` chunks from `maker`. */
export function syntheticDocument(maker: () => SyntheticChunk, count: number, filename: string): SyntheticDocument {
  const chunks = Array.from({ length: count }, (_, chunkIndex) => {
    const made = maker();
    return { id: randomUUID(), chunkIndex, content: made.content, vector: made.vector };
  });
  return { id: randomUUID(), filename, size: chunks.reduce((sum, chunk) => sum + Buffer.byteLength(chunk.content), 0), chunks };
}

/**
 * Writes ready documents and their chunks with prisma, and their vectors and terms through
 * `index.upsert` (up to `chunksPerUpsert` at a time), as embed jobs would. Returns the chunks written.
 */
export async function writeDocuments(
  prisma: PrismaClient,
  index: VectorIndex,
  workspaceId: string,
  documents: readonly SyntheticDocument[],
  options: { chunksPerUpsert?: number; onUpsertFailed?: (error: unknown, attempt: number) => boolean } = {},
): Promise<number> {
  const chunksPerUpsert = options.chunksPerUpsert ?? CHUNKS_PER_UPSERT;
  await prisma.document.createMany({
    data: documents.map((document) => ({
      id: document.id,
      workspaceId,
      filename: document.filename,
      contentType: 'text/plain',
      sizeBytes: document.size,
      sha256: createHash('sha256').update(document.id).digest('hex'),
      status: 'ready' as const,
      chunkCount: document.chunks.length,
      embeddedChunks: document.chunks.length,
    })),
  });
  const chunkRows = documents.flatMap((document) => document.chunks.map((chunk) => ({ ...chunk, documentId: document.id })));
  const embeddedAt = new Date();
  await prisma.chunk.createMany({
    data: chunkRows.map((chunk) => ({
      id: chunk.id,
      documentId: chunk.documentId,
      chunkIndex: chunk.chunkIndex,
      content: chunk.content,
      tokenCount: Math.round(chunk.content.split(/\s+/).length * 1.3),
      embeddedAt,
    })),
  });
  for (let first = 0; first < chunkRows.length; first += chunksPerUpsert) {
    const batch = chunkRows.slice(first, first + chunksPerUpsert).map((chunk) => ({
      chunkId: chunk.id,
      documentId: chunk.documentId,
      workspaceId,
      embedding: chunk.vector,
      terms: analyze(chunk.content),
    }));
    // An upsert written again replaces what it wrote: an embed job retries a failed one the same way.
    for (let attempt = 1; ; attempt++) {
      try {
        await index.upsert(batch);
        break;
      } catch (error) {
        if (!options.onUpsertFailed?.(error, attempt)) throw error;
        await new Promise((resolve) => setTimeout(resolve, 1_000 * 2 ** (attempt - 1)));
      }
    }
  }
  return chunkRows.length;
}

/** SciFact's test queries, in file order. */
export async function readQueries(): Promise<string[]> {
  return (await readFile(path.join(scifactDir, 'queries_test.jsonl'), 'utf8'))
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => (JSON.parse(line) as { _id: string; text: string }).text);
}
