-- CreateEnum
CREATE TYPE "job_status" AS ENUM ('queued', 'running', 'done', 'failed');

-- CreateEnum
CREATE TYPE "job_kind" AS ENUM ('parse', 'embed', 'index_delete');

-- DropForeignKey
ALTER TABLE "ingestion_jobs" DROP CONSTRAINT "ingestion_jobs_document_id_fkey";

-- AlterTable
ALTER TABLE "documents" ADD COLUMN     "embedded_chunks" INTEGER NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "jobs" (
    "id" UUID NOT NULL,
    "kind" "job_kind" NOT NULL,
    "document_id" UUID,
    "user_id" UUID,
    "payload" JSONB NOT NULL DEFAULT '{}',
    "status" "job_status" NOT NULL DEFAULT 'queued',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "run_after" TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp(),
    "lease_expires" TIMESTAMPTZ(6),
    "last_error" TEXT,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp(),
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "jobs_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "jobs_document_id_key" ON "jobs"("document_id");

-- CreateIndex
CREATE INDEX "jobs_status_run_after_idx" ON "jobs"("status", "run_after");

-- AddForeignKey
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_document_id_fkey" FOREIGN KEY ("document_id") REFERENCES "documents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Carry the queue over. Parse jobs keep their state and chunking settings. Documents that were
-- ready had no embeddings yet: they wait for an embed job and are not ready until it is done.
INSERT INTO "jobs" ("id", "kind", "document_id", "user_id", "payload", "status", "attempts", "run_after", "lease_expires", "last_error", "created_at", "updated_at")
SELECT j."id",
       CASE WHEN j."status" = 'done' THEN 'embed'::"job_kind" ELSE 'parse'::"job_kind" END,
       j."document_id",
       w."user_id",
       CASE WHEN j."status" = 'done' THEN '{}'::jsonb
            ELSE jsonb_build_object('chunkTokens', j."chunk_tokens", 'overlapTokens', j."overlap_tokens") END,
       CASE WHEN j."status" = 'done' THEN 'queued'::"job_status" ELSE j."status"::text::"job_status" END,
       CASE WHEN j."status" = 'done' THEN 0 ELSE j."attempts" END,
       j."run_after", NULL, j."last_error", j."created_at", j."updated_at"
  FROM "ingestion_jobs" j
  JOIN "documents" d ON d."id" = j."document_id"
  JOIN "workspaces" w ON w."id" = d."workspace_id";

UPDATE "documents" SET "status" = 'processing'
 WHERE "status" = 'ready' AND "id" IN (SELECT "document_id" FROM "jobs" WHERE "kind" = 'embed');

-- DropTable
DROP TABLE "ingestion_jobs";

-- DropEnum
DROP TYPE "ingestion_job_status";
