-- AlterTable
ALTER TABLE "agent_jobs" ADD COLUMN     "delivered_seq" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "followed_at" TIMESTAMPTZ(3),
ADD COLUMN     "workspace_ids" UUID[] DEFAULT ARRAY[]::UUID[];
