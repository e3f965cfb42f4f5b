import { Prisma } from '../../generated/prisma/client.js';

/** A metadata object (SQL) with the document's title under `title`, unless it has a `title` of its own. */
export function withTitle(metadata: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`CASE WHEN d.title IS NULL THEN ${metadata} ELSE jsonb_build_object('title', d.title) || ${metadata} END`;
}

/** A document's name as the ranking's document prior reads it, of the document aliased `d`. */
export const documentNameSql = Prisma.sql`COALESCE(d.name_words, d.index_context, d.filename)`;

/**
 * The stored chunks among `chunkIds` (a uuid[] expression) whose document is ready and in one of
 * `workspaceIds`, as `StoredChunk` rows: what a search may show. One rule for the service's
 * read-back and the pgvector index's read-along.
 */
export function readyChunks(chunkIds: Prisma.Sql, workspaceIds: readonly string[]): Prisma.Sql {
  return Prisma.sql`
    SELECT c.id::text AS id, c.document_id::text AS "documentId", c.chunk_index AS "chunkIndex", c.content,
           ${withTitle(Prisma.sql`c.metadata`)} AS metadata, d.filename,
           ${documentNameSql} AS "documentName"
      FROM chunks c JOIN documents d ON d.id = c.document_id
     WHERE c.id = ANY(${chunkIds}) AND d.workspace_id = ANY(${[...workspaceIds]}::uuid[]) AND d.status = 'ready'`;
}
