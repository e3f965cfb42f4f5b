-- The file route reads an uploaded file back in slices (substring of the bytea), a slice at a
-- time as its client takes it. Stored compressed (the default for bytea), every slice had to be
-- decompressed from the file's start: a 45 MiB text file took 3 s instead of 1 s, growing with
-- the square of the size. Stored uncompressed out of line, a slice reads only the TOAST chunks it
-- spans. PDFs and DOCX files are compressed already and were stored uncompressed anyway; text
-- takes more room now.
ALTER TABLE "document_sources" ALTER COLUMN "bytes" SET STORAGE EXTERNAL;

-- Files stored compressed before, written again uncompressed (a new value of the column takes
-- its storage; the same value would be kept compressed as it is).
UPDATE "document_sources" SET "bytes" = "bytes" || ''::bytea WHERE pg_column_compression("bytes") IS NOT NULL;
