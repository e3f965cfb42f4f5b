-- A document's title (its file's own title, else its first heading, else its file name's words)
-- and what its chunks are indexed with besides their text (file name words and title). Both are
-- written when the document is parsed. Chunks of documents parsed before are indexed with their
-- file name's words (ingestion/jobs.ts) once re-embedded (`kb reindex`).
ALTER TABLE "documents" ADD COLUMN "title" TEXT;
ALTER TABLE "documents" ADD COLUMN "index_context" TEXT;
