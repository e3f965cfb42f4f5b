-- How far OCR has read a document: the pages gone through and its page count, written by the
-- parse as it reads (ingestion/jobs.ts), so every process shows the same progress.
ALTER TABLE "documents" ADD COLUMN "ocr_pages_done" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "documents" ADD COLUMN "ocr_pages_total" INTEGER NOT NULL DEFAULT 0;
