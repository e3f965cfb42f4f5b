import { AppError, notFound } from '../../errors.js';
import { Prisma, type Document } from '../../generated/prisma/client.js';
import { checkFilename, checkMetadata } from '../../input-limits.js';
import type { Access } from '../../auth/policy.js';
import { documentContext, nameWords } from '../ingestion/document-name.js';
import { queueEmbedding } from '../jobs/queue.js';
import { findDocument, type DocumentDependencies } from './service.js';

/** What PATCH /v1/kb/documents/{id} may change; a field left out (or a null file name) stays as it is. */
export type DocumentChanges = { filename?: string | null; metadata?: unknown };

/**
 * Renames a document or replaces its metadata (null clears it). The metadata filter reads the
 * new metadata at once. A document's name is part of what its chunks are indexed with (its
 * file name's words, and the title when the title came from them), so renaming a `ready`
 * document queues its chunks to be embedded again: it stays searchable under its old vectors
 * meanwhile, `embedded_chunks` counting the chunks done. A document being processed, or being
 * indexed again after a rename, cannot be renamed (409 `document_busy`): that work has read the
 * old name. A failed one takes the new name when it is retried.
 */
export async function updateDocument(dependencies: Pick<DocumentDependencies, 'prisma' | 'ingestion'>, viewer: Access, id: string, changes: DocumentChanges): Promise<Document> {
  const { prisma } = dependencies;
  const filename = changes.filename === undefined || changes.filename === null ? undefined : checkFilename(changes.filename);
  const metadata = changes.metadata === undefined ? undefined : checkMetadata(changes.metadata);
  const found = await findDocument(dependencies, viewer, id, { query: { select: { id: true } } });
  const reembed = await prisma.$transaction(async (tx) => {
    // The row is locked until the end: a retry, an upload of the same bytes or another rename waits.
    const [document] = await tx.$queryRaw<
      { filename: string; status: Document['status']; text: string | null; title: string | null; name_words: string | null; chunk_count: number; embedded_chunks: number }[]
    >`
      SELECT filename, status::text AS status, text, title, name_words, chunk_count, embedded_chunks FROM documents WHERE id = ${found.id}::uuid FOR UPDATE`;
    if (!document) throw notFound('document', id);
    if (metadata !== undefined) await tx.document.update({ where: { id: found.id }, data: { metadata: metadata as object } });
    if (filename === undefined || filename === document.filename) return false;
    if (document.status === 'queued' || document.status === 'processing') {
      throw new AppError('document_busy', `document ${found.id} is ${document.status}: it can be renamed once it is ready or failed`);
    }
    // A ready document short of its chunks is being indexed under its previous name: that
    // embedding would mark chunks done with the old name's vectors after this rename asked for
    // them again. Once all are marked, what is left of it (the job's end) is harmless.
    if (document.status === 'ready' && document.embedded_chunks < document.chunk_count) {
      throw new AppError('document_busy', `document ${found.id} is being indexed under its previous name: it can be renamed again once that is done`);
    }
    if (document.status === 'failed' || document.text === null || document.chunk_count === 0) {
      await tx.document.update({ where: { id: found.id }, data: { filename } });
      return false;
    }
    const words = nameWords(filename, document.text);
    // A title that was the old name's words follows the name; one from the file or its headings stays.
    const title = document.title === null || document.title === document.name_words ? words : document.title;
    await tx.document.update({
      where: { id: found.id },
      data: { filename, nameWords: words, title, indexContext: documentContext(words, title), embeddedChunks: 0 },
    });
    await tx.$executeRaw`UPDATE chunks SET embedded_at = NULL WHERE document_id = ${found.id}::uuid`;
    await queueEmbedding(tx, Prisma.sql`SELECT ${found.id}::uuid, ${viewer.userId}::uuid`);
    return true;
  });
  if (reembed) dependencies.ingestion?.notify();
  return prisma.document.findUniqueOrThrow({ where: { id: found.id } });
}
