-- CreateEnum
CREATE TYPE "ingestion_job_status" AS ENUM ('queued', 'running', 'done', 'failed');

-- CreateTable
CREATE TABLE "document_sources" (
    "document_id" UUID NOT NULL,
    "bytes" BYTEA NOT NULL,

    CONSTRAINT "document_sources_pkey" PRIMARY KEY ("document_id")
);

-- CreateTable
CREATE TABLE "ingestion_jobs" (
    "id" UUID NOT NULL,
    "document_id" UUID NOT NULL,
    "status" "ingestion_job_status" NOT NULL DEFAULT 'queued',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "chunk_tokens" INTEGER NOT NULL,
    "overlap_tokens" INTEGER NOT NULL,
    "run_after" TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp(),
    "lease_expires" TIMESTAMPTZ(6),
    "last_error" TEXT,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp(),
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "ingestion_jobs_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "ingestion_jobs_document_id_key" ON "ingestion_jobs"("document_id");

-- CreateIndex
CREATE INDEX "ingestion_jobs_status_run_after_idx" ON "ingestion_jobs"("status", "run_after");

-- AddForeignKey
ALTER TABLE "document_sources" ADD CONSTRAINT "document_sources_document_id_fkey" FOREIGN KEY ("document_id") REFERENCES "documents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ingestion_jobs" ADD CONSTRAINT "ingestion_jobs_document_id_fkey" FOREIGN KEY ("document_id") REFERENCES "documents"("id") ON DELETE CASCADE ON UPDATE CASCADE;
