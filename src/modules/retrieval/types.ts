import { z } from 'zod';
import { builder } from '../../graphql/builder.js';
import { jsonObjectKey } from '../../input-limits.js';
import { viewerOf } from '../../graphql/viewer.js';
import { AppError } from '../../errors.js';
import { checkFilter } from './metadata-filter.js';
import { namedWorkspaces, searchInputRules, searchLimits, searchModes } from './input.js';
import { search, type SearchResult } from './service.js';

const SearchMode = builder.enumType('SearchMode', {
  values: {
    hybrid: { description: 'Vector and keyword rankings fused (the default).' },
    vector: { description: 'Cosine similarity of the embeddings only.' },
    keyword: { description: 'BM25 over the analysed words only.' },
  } satisfies Record<(typeof searchModes)[number], unknown>,
});

const filterScalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const filterCondition = z.union([filterScalar, z.object({ in: z.array(filterScalar).max(searchLimits.maxFilterValues) }).strict()]);

const workspaceIdDescription = 'The workspace to search. Required unless several are named instead.';
const workspaceIdsDescription = `Several workspaces to search together, ranked as one: 1 to ${searchLimits.maxWorkspaces} different ones, instead of a single workspace id.`;

const SearchInput = builder.inputType('SearchInput', {
  fields: (t) => ({
    query: t.string({
      required: true,
      description: `Searched for; at most ${searchLimits.maxQueryCharacters} characters.`,
      validate: searchInputRules.query,
    }),
    workspaceId: t.id({ required: false, description: workspaceIdDescription }),
    workspaceIds: t.idList({ required: false, description: workspaceIdsDescription }),
    topK: t.int({
      required: false,
      description: `Results wanted, 1 to ${searchLimits.maxTopK}; default ${searchLimits.defaultTopK}.`,
      validate: searchInputRules.topK,
    }),
    mode: t.field({ type: SearchMode, required: false }),
    filter: t.field({
      type: 'JSON',
      required: false,
      description: 'Only documents whose metadata matches: `{"key": value}` for equality, `{"key": {"in": [values]}}` for one of several.',
      // The service's own check first, in its words (it also refuses `__proto__`, which a zod
      // record would drop silently); the record then describes the shape for the OpenAPI description.
      validate: z
        .unknown()
        .superRefine((filter, context) => {
          try {
            checkFilter(filter);
          } catch (error) {
            if (!(error instanceof AppError)) throw error;
            const field = error.details.field ?? 'filter';
            context.addIssue({ code: 'custom', message: error.message.slice(field.length + 2), path: field.split('.').slice(1) });
          }
        })
        .pipe(
          z
            .record(jsonObjectKey(), filterCondition)
            .meta({ maxProperties: searchLimits.maxFilterKeys })
            .describe('Only documents whose metadata matches: `{"key": value}` for equality, `{"key": {"in": [values]}}` for one of several.'),
        )
        .nullish(),
    }),
  }),
  // The workspace fields are checked together: exactly one of them names what is searched.
  validate: z
    .object({
      workspaceId: z.string({ error: 'must not be null' }).optional().describe(workspaceIdDescription),
      workspaceIds: z
        .array(z.string({ error: 'must not be null' }), { error: 'must not be null' })
        .min(1, 'must name at least one workspace')
        .optional()
        .describe(workspaceIdsDescription),
    })
    // The other fields pass through as they are (their own validators check them).
    .loose()
    .meta({ exactlyOneOf: ['workspaceId', 'workspaceIds'] })
    .superRefine((input, context) => {
      try {
        namedWorkspaces(input);
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        context.addIssue({ code: 'custom', message: error.message.slice(`${error.details.field}: `.length), path: [error.details.field ?? 'workspace_id'] });
      }
    }),
});

const SearchResultRef = builder.objectRef<SearchResult>('SearchResult').implement({
  description: 'A chunk that matched, with its document.',
  fields: (t) => ({
    documentId: t.exposeID('documentId'),
    filename: t.exposeString('filename'),
    chunkIndex: t.exposeInt('chunkIndex'),
    content: t.exposeString('content'),
    score: t.exposeFloat('score', {
      description: 'Higher is more similar; results come ordered by it. Hybrid: fused, 0 to 1. Vector: cosine similarity. Keyword: BM25.',
    }),
    metadata: t.expose('metadata', { type: 'JSON', description: "The chunk's metadata: `page` for PDFs, headings and more by format." }),
  }),
});

builder.queryField('search', (t) =>
  t.field({
    type: [SearchResultRef],
    description: "Searches the ready documents of a workspace, or of several ranked together, for the chunks that best match the query.",
    authScopes: { scope: 'kb:read' },
    extensions: { rateLimit: 'search' },
    args: { input: t.arg({ type: SearchInput, required: true }) },
    resolve: (_root, { input }, context) =>
      search(
        context.retrieval,
        viewerOf(context),
        {
          ...input,
          workspaceId: input.workspaceId == null ? input.workspaceId : String(input.workspaceId),
          workspaceIds: input.workspaceIds == null ? input.workspaceIds : input.workspaceIds.map(String),
        },
        context.signal,
      ),
  }),
);
