-- AlterTable
ALTER TABLE "agent_jobs" ADD COLUMN     "lease_expires_at" TIMESTAMPTZ(3),
ADD COLUMN     "support_score" DOUBLE PRECISION;

-- AlterTable
ALTER TABLE "chat_messages" ADD COLUMN     "job_id" UUID,
ADD COLUMN     "rewritten_query" TEXT,
ADD COLUMN     "support_score" DOUBLE PRECISION;

-- CreateIndex
CREATE INDEX "agent_jobs_status_lease_expires_at_idx" ON "agent_jobs"("status", "lease_expires_at");
