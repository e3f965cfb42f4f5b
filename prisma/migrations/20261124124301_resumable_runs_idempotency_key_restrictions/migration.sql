-- AlterTable
ALTER TABLE "agent_jobs" ADD COLUMN     "resumable" BOOLEAN NOT NULL DEFAULT false;

-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "workspace_ids" UUID[] DEFAULT ARRAY[]::UUID[],
ADD COLUMN     "workspace_restricted" BOOLEAN NOT NULL DEFAULT false;

-- CreateTable
CREATE TABLE "agent_events" (
    "job_id" UUID NOT NULL,
    "seq" INTEGER NOT NULL,
    "data" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp(),

    CONSTRAINT "agent_events_pkey" PRIMARY KEY ("job_id","seq")
);

-- CreateTable
CREATE TABLE "idempotency_keys" (
    "user_id" UUID NOT NULL,
    "key" TEXT NOT NULL,
    "method" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "request_hash" TEXT NOT NULL,
    "response_status" INTEGER,
    "response_headers" JSONB,
    "response_body" BYTEA,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp(),
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("user_id","key")
);

-- CreateIndex
CREATE INDEX "idempotency_keys_expires_at_idx" ON "idempotency_keys"("expires_at");

-- AddForeignKey
ALTER TABLE "agent_events" ADD CONSTRAINT "agent_events_job_id_fkey" FOREIGN KEY ("job_id") REFERENCES "agent_jobs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;
