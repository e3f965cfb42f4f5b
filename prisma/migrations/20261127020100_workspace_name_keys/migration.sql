-- Workspace names are compared by a key that folds more than case: nameKey in
-- src/input-limits.ts (NFKC, case folding, invisible characters removed), which SQL cannot
-- compute. This migration's step in src/db/migration-steps.ts writes every workspace's key right
-- after this statement, in the same transaction. Each key is first set to a value that no name
-- has (U+0001 and the id), so that the new keys can be written in any order under the unique
-- index on (user_id, name_key).
UPDATE "workspaces" SET "name_key" = chr(1) || "id"::text;
