-- CreateTable
CREATE TABLE "job_turns" (
    "user_id" UUID NOT NULL,
    "served_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "job_turns_pkey" PRIMARY KEY ("user_id")
);

-- AddForeignKey
ALTER TABLE "job_turns" ADD CONSTRAINT "job_turns_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;
