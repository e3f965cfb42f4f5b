// Search: POST /v1/kb/query and its legacy alias POST /query.
import type { SearchInput } from '../../generated/graphql/graphql.js';
import { graphql } from '../../generated/graphql/gql.js';
import { jsonBody, route, type Route } from '../route.js';
import * as respond from '../response-kinds.js';

export const RestSearch = graphql(`
  query RestSearch($input: SearchInput!) {
    result: search(input: $input) {
      document_id: documentId
      filename
      chunk_index: chunkIndex
      content
      score
      metadata
    }
  }
`);

/** `POST /v1/kb/query` and its legacy alias `POST /query`: one definition, so they cannot drift apart. */
const searchRoute = (path: string) =>
  route({
    method: 'POST',
    path,
    tag: 'Search',
    summary:
      path === '/query'
        ? 'The legacy alias of POST /v1/kb/query; it behaves identically.'
        : "Vector (or keyword, or hybrid) search of a workspace's chunks. No answer is generated.",
    operation: RestSearch,
    raises: ['not_found'],
    body: jsonBody(
      'SearchInput',
      { query: 'query', workspace_id: 'workspaceId', workspace_ids: 'workspaceIds[]', top_k: 'topK', mode: 'mode', filter: 'filter' },
      { ids: ['workspace_id', 'workspace_ids'] },
    ),
    variables: ({ body }) => ({ input: body as SearchInput }),
    response: respond.wrap('results'),
  });

export const searchRoutes: Route[] = [searchRoute('/v1/kb/query'), searchRoute('/query')];
