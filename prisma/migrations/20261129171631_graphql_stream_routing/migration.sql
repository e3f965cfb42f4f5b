-- CreateTable
CREATE TABLE "graphql_streams" (
    "token" UUID NOT NULL,
    "user_id" UUID NOT NULL,
    "viewer" JSONB NOT NULL,
    "holder" TEXT,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT clock_timestamp(),

    CONSTRAINT "graphql_streams_pkey" PRIMARY KEY ("token")
);

-- CreateTable
CREATE TABLE "graphql_stream_requests" (
    "id" UUID NOT NULL,
    "token" UUID NOT NULL,
    "holder" TEXT NOT NULL,
    "method" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "headers" JSONB NOT NULL,
    "body" TEXT NOT NULL,
    "viewer" JSONB NOT NULL,
    "taken" BOOLEAN NOT NULL DEFAULT false,
    "status" INTEGER,
    "answer" JSONB,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT clock_timestamp(),

    CONSTRAINT "graphql_stream_requests_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "graphql_stream_requests_created_at_idx" ON "graphql_stream_requests"("created_at");
