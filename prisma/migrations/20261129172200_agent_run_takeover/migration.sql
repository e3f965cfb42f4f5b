-- AlterTable
ALTER TABLE "agent_jobs" ADD COLUMN     "request" JSONB,
ADD COLUMN     "takeovers" INTEGER NOT NULL DEFAULT 0;
