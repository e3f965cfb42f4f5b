import { AppError } from '../errors.js';

/**
 * What one GraphQL operation may ask for. Every REST endpoint's persisted operation stays well
 * inside these at its largest page (test/graphql-limits.test.ts measures them), and so does a
 * client query for a page of 1,000 documents with all their fields. docs/api.md explains each.
 */
export const graphqlLimits = {
  /** Lexical tokens in the document (names, punctuation, values), checked while parsing. */
  maxTokens: 2_000,
  /** Aliased fields in the operation, fragments included. */
  maxAliases: 30,
  /** Nested selections, counted as fields (fragments add none). */
  maxDepth: 10,
  /** The operation's estimated cost; see `fieldCost` in cost.ts. */
  maxCost: 25_000,
  /** `first`/`last` on every connection (Relay): the same bound as REST `limit`. */
  maxConnectionSize: 1_000,
  /** The page size of a connection asked without `first` or `last`. */
  defaultConnectionSize: 100,
} as const;

/** A 400 naming the limit and the numbers: `query depth 14 exceeds the limit of 10`. */
export const limitExceeded = (what: string, actual: number | undefined, limit: number) =>
  new AppError('bad_request', `query ${what}${actual === undefined ? '' : ` ${actual}`} exceeds the limit of ${limit}`, { field: 'query' });
