-- The words of a document's file name as its text spells them, which the search's document prior
-- reads; written when the document is parsed. For documents parsed before, the prior reads their
-- index context (file name words and title) as it did, until they are parsed again.
ALTER TABLE "documents" ADD COLUMN "name_words" TEXT;
