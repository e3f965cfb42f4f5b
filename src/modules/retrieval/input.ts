import { z } from 'zod';
import { badRequest } from '../../errors.js';
import { validationErrorFromIssues } from '../../graphql/validation-error.js';
import { countFromOneTo, notBlankTextPattern, textInput, withMaxCharacters } from '../../input-limits.js';
import { filterLimits } from './metadata-filter.js';

export const searchLimits = {
  /** Longest query in characters; the model reads its first 512 tokens in any case. */
  maxQueryCharacters: 10_000,
  defaultTopK: 5,
  maxTopK: 100,
  /** Distinct analysed words of a query the keyword side ranks on; the rest are ignored. */
  maxKeywordTerms: 32,
  ...filterLimits,
  /** Different workspaces one search may name (`workspaceIds`). */
  maxWorkspaces: 100,
} as const;

export const searchModes = ['hybrid', 'vector', 'keyword'] as const;
export type SearchMode = (typeof searchModes)[number];

/** Names the workspace to search (`workspaceId`) or several ranked together (`workspaceIds`): one of the two. */
export type SearchInput = {
  query: string;
  workspaceId?: string | null;
  workspaceIds?: readonly string[] | null;
  topK?: number | null;
  mode?: SearchMode | null;
  filter?: unknown;
};

/**
 * The rules of a search's fields: the GraphQL input's validators (types.ts, and through them the
 * OpenAPI description) and the search's own check (`checkSearchInput`) are these. The filter's
 * rules are `checkFilter`'s (metadata-filter.ts), the workspaces' `namedWorkspaces`.
 */
export const searchInputRules = {
  query: withMaxCharacters(
    textInput().refine((query) => query.trim().length > 0, 'must not be empty'),
    searchLimits.maxQueryCharacters,
  ).meta({ pattern: notBlankTextPattern }),
  topK: countFromOneTo(searchLimits.maxTopK),
};

const searchInputSchema = z.object(searchInputRules).loose();

/** The query and the number of results of a search, checked by the same rules as the GraphQL input (a 400 naming the field), with the default. */
export function checkSearchInput(input: Pick<SearchInput, 'query' | 'topK'>): { query: string; topK: number } {
  const checked = searchInputSchema.safeParse(input);
  if (!checked.success) throw validationErrorFromIssues(checked.error.issues);
  return { query: checked.data.query, topK: checked.data.topK ?? searchLimits.defaultTopK };
}

/** The workspaces a search names, from `workspaceId` or `workspaceIds` (exactly one of them), as given. */
export function namedWorkspaces(input: Pick<SearchInput, 'workspaceId' | 'workspaceIds'>): readonly string[] {
  const list = input.workspaceIds;
  // Left out is not the same as null: a null names nothing, and is refused as REST refuses other nulls.
  if (input.workspaceId === null) throw badRequest('workspace_id', 'must not be null');
  if (list === null) throw badRequest('workspace_ids', 'must not be null');
  if (input.workspaceId !== undefined && list !== undefined) throw badRequest('workspace_ids', 'name the workspaces with workspace_id or workspace_ids, not both');
  if (input.workspaceId !== undefined) return [input.workspaceId];
  if (list === undefined) throw badRequest('workspace_id', 'is required (or workspace_ids, to search several workspaces)');
  if (list.length === 0) throw badRequest('workspace_ids', 'must name at least one workspace');
  if (new Set(list.map((id) => id.toLowerCase())).size > searchLimits.maxWorkspaces) {
    throw badRequest('workspace_ids', `must name at most ${searchLimits.maxWorkspaces} different workspaces`);
  }
  return list;
}
