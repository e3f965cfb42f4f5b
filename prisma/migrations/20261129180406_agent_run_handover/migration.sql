-- AlterTable
ALTER TABLE "agent_jobs" ADD COLUMN     "handed_over" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "request" JSONB,
ADD COLUMN     "takeovers" INTEGER NOT NULL DEFAULT 0;
