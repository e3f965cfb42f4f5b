// Chat sessions and their messages.
import type { CreateChatSessionInput, SendChatMessageInput } from '../../generated/graphql/graphql.js';
import { graphql } from '../../generated/graphql/gql.js';
import { listQuery } from '../request-input.js';
import { idParam, jsonBody, listVariables, route, type Listed, type RestRequest, type Route } from '../route.js';
import * as respond from '../response-kinds.js';

export const RestListChatSessions = graphql(`
  query RestListChatSessions($first: Int, $after: String) {
    result: chatSessions(first: $first, after: $after) {
      pageInfo { hasNextPage endCursor }
      edges {
        node { id title workspace_ids: workspaceIds created_at: createdAt updated_at: updatedAt message_count: messageCount }
      }
    }
  }
`);

export const RestGetChatSession = graphql(`
  query RestGetChatSession($id: ID!) {
    result: chatSession(id: $id) {
      id
      title
      workspace_ids: workspaceIds
      created_at: createdAt
      updated_at: updatedAt
      message_count: messageCount
      messages { id role content sources created_at: createdAt }
    }
  }
`);

export const RestCreateChatSession = graphql(`
  mutation RestCreateChatSession($input: CreateChatSessionInput) {
    result: createChatSession(input: $input) {
      __typename
      ... on AppError { code message }
      ... on ChatSession {
        id
        title
        workspace_ids: workspaceIds
        created_at: createdAt
        updated_at: updatedAt
        message_count: messageCount
      }
    }
  }
`);

export const RestDeleteChatSession = graphql(`
  mutation RestDeleteChatSession($id: ID!) {
    result: deleteChatSession(id: $id) {
      __typename
      ... on AppError { code message }
      ... on Deleted { id }
    }
  }
`);

export const RestSendChatMessage = graphql(`
  mutation RestSendChatMessage($sessionId: ID!, $input: SendChatMessageInput!) {
    result: sendChatMessage(sessionId: $sessionId, input: $input) {
      __typename
      ... on AppError { code message }
      ... on ChatMessage { id role content sources created_at: createdAt }
    }
  }
`);

export const chatRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/v1/chat/sessions',
    tag: 'Chat',
    summary: "The caller's chat sessions, most recently updated first.",
    operation: RestListChatSessions,
    query: listQuery,
    variables: ({ query }: RestRequest<Listed>) => listVariables(query),
    response: respond.list(),
  }),
  route({
    method: 'POST',
    path: '/v1/chat/sessions',
    tag: 'Chat',
    summary: 'Creates a chat session, optionally titled and bound to workspaces.',
    operation: RestCreateChatSession,
    raises: ['not_found'],
    idempotent: true,
    body: jsonBody('CreateChatSessionInput', { title: 'title', workspace_ids: 'workspaceIds[]' }, { optional: true, ids: ['workspace_ids'] }),
    variables: ({ body }) => ({ input: (body as CreateChatSessionInput | undefined) ?? null }),
    response: respond.json(201),
  }),
  route({
    method: 'GET',
    path: '/v1/chat/sessions/:id',
    tag: 'Chat',
    summary: 'A chat session with its messages, oldest first.',
    operation: RestGetChatSession,
    raises: ['not_found'],
    variables: idParam,
    response: respond.json(200),
  }),
  route({
    method: 'DELETE',
    path: '/v1/chat/sessions/:id',
    tag: 'Chat',
    summary: 'Deletes a chat session and its messages.',
    operation: RestDeleteChatSession,
    raises: ['not_found'],
    variables: idParam,
    response: respond.empty(),
  }),
  route({
    method: 'POST',
    path: '/v1/chat/sessions/:id/messages',
    tag: 'Chat',
    summary: 'Adds a message to a session (no answer is generated: the agent does that).',
    operation: RestSendChatMessage,
    raises: ['not_found'],
    idempotent: true,
    body: jsonBody('SendChatMessageInput', { content: 'content', role: 'role' }),
    variables: ({ params, body }) => ({ sessionId: params.id!, input: body as SendChatMessageInput }),
    response: respond.json(201),
  }),
];
