-- AlterTable
ALTER TABLE "chat_sessions" ALTER COLUMN "updated_at" SET DATA TYPE TIMESTAMPTZ(6);

-- AlterTable
ALTER TABLE "documents" ALTER COLUMN "updated_at" SET DATA TYPE TIMESTAMPTZ(6);

-- AlterTable
ALTER TABLE "workspaces" ALTER COLUMN "updated_at" SET DATA TYPE TIMESTAMPTZ(6);

-- Prisma stamps updated_at in the client (milliseconds, the application's clock) before the
-- INSERT reaches the database, which then stamps created_at with clock_timestamp()
-- (microseconds, the database's clock): a new row's updated_at came out earlier than its
-- created_at. A new row now takes its created_at as updated_at, and no later write can set
-- updated_at earlier than created_at (the two clocks may differ on PostgreSQL).
CREATE FUNCTION "kb_updated_at_not_before_created_at"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR NEW."updated_at" < NEW."created_at" THEN
    NEW."updated_at" := NEW."created_at";
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER "workspaces_updated_at" BEFORE INSERT OR UPDATE ON "workspaces"
  FOR EACH ROW EXECUTE FUNCTION "kb_updated_at_not_before_created_at"();
CREATE TRIGGER "documents_updated_at" BEFORE INSERT OR UPDATE ON "documents"
  FOR EACH ROW EXECUTE FUNCTION "kb_updated_at_not_before_created_at"();
CREATE TRIGGER "chat_sessions_updated_at" BEFORE INSERT OR UPDATE ON "chat_sessions"
  FOR EACH ROW EXECUTE FUNCTION "kb_updated_at_not_before_created_at"();

-- Rows written before this migration.
UPDATE "workspaces" SET "updated_at" = "created_at" WHERE "updated_at" < "created_at";
UPDATE "documents" SET "updated_at" = "created_at" WHERE "updated_at" < "created_at";
UPDATE "chat_sessions" SET "updated_at" = "created_at" WHERE "updated_at" < "created_at";
