// The caller's API keys: list, create (the raw key once), revoke.
import type { CreateApiKeyInput } from '../../generated/graphql/graphql.js';
import { graphql } from '../../generated/graphql/gql.js';
import { listQuery } from '../request-input.js';
import { idParam, jsonBody, listVariables, route, type Listed, type RestRequest, type Route } from '../route.js';
import * as respond from '../response-kinds.js';

export const RestListApiKeys = graphql(`
  query RestListApiKeys($first: Int, $after: String) {
    result: apiKeys(first: $first, after: $after) {
      pageInfo { hasNextPage endCursor }
      edges { node { id name display_key: displayKey scopes workspace_ids: workspaceIds last_used_at: lastUsedAt created_at: createdAt } }
    }
  }
`);

export const RestCreateApiKey = graphql(`
  mutation RestCreateApiKey($input: CreateApiKeyInput!) {
    result: createApiKey(input: $input) {
      __typename
      ... on AppError { code message }
      ... on NewApiKey { id name display_key: displayKey raw_key: rawKey scopes workspace_ids: workspaceIds }
    }
  }
`);

export const RestRevokeApiKey = graphql(`
  mutation RestRevokeApiKey($id: ID!) {
    result: revokeApiKey(id: $id) {
      __typename
      ... on AppError { code message }
      ... on Deleted { id }
    }
  }
`);

export const apiKeyRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/v1/user/me/api-keys',
    tag: 'API keys',
    summary: "The caller's active API keys, newest first; never the key values.",
    operation: RestListApiKeys,
    query: listQuery,
    variables: ({ query }: RestRequest<Listed>) => listVariables(query),
    response: respond.list(),
  }),
  route({
    method: 'POST',
    path: '/v1/user/me/api-keys',
    tag: 'API keys',
    summary: 'Creates an API key with the given scopes; the raw key is in this response only.',
    operation: RestCreateApiKey,
    raises: ['not_found'],
    idempotent: true,
    body: jsonBody('CreateApiKeyInput', { name: 'name', scopes: 'scopes[]', workspace_ids: 'workspaceIds[]' }, { ids: ['workspace_ids'] }),
    variables: ({ body }) => ({ input: body as CreateApiKeyInput }),
    response: respond.json(201),
  }),
  route({
    method: 'DELETE',
    path: '/v1/user/me/api-keys/:id',
    tag: 'API keys',
    summary: 'Revokes an API key at once.',
    operation: RestRevokeApiKey,
    raises: ['not_found'],
    variables: idParam,
    response: respond.empty(),
  }),
];
