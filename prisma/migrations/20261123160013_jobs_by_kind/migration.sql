-- CreateIndex
CREATE INDEX "jobs_kind_status_run_after_idx" ON "jobs"("kind", "status", "run_after");
