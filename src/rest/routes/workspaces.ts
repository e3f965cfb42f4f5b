// Workspaces: list, create, read, rename, delete, and their stats and scan.
import type { WorkspaceInput } from '../../generated/graphql/graphql.js';
import { graphql } from '../../generated/graphql/gql.js';
import { listQuery } from '../request-input.js';
import { idParam, jsonBody, listVariables, route, type Listed, type RestRequest, type Route } from '../route.js';
import * as respond from '../response-kinds.js';

export const RestListWorkspaces = graphql(`
  query RestListWorkspaces($first: Int, $after: String) {
    result: workspaces(first: $first, after: $after) {
      pageInfo { hasNextPage endCursor }
      edges { node { id name created_at: createdAt updated_at: updatedAt } }
    }
  }
`);

export const RestGetWorkspace = graphql(`
  query RestGetWorkspace($id: ID!) {
    result: workspace(id: $id) { id name created_at: createdAt updated_at: updatedAt }
  }
`);

export const RestCreateWorkspace = graphql(`
  mutation RestCreateWorkspace($input: WorkspaceInput!) {
    result: createWorkspace(input: $input) {
      __typename
      ... on AppError { code message }
      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }
    }
  }
`);

export const RestUpdateWorkspace = graphql(`
  mutation RestUpdateWorkspace($id: ID!, $input: WorkspaceInput!) {
    result: updateWorkspace(id: $id, input: $input) {
      __typename
      ... on AppError { code message }
      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }
    }
  }
`);

export const RestDeleteWorkspace = graphql(`
  mutation RestDeleteWorkspace($id: ID!) {
    result: deleteWorkspace(id: $id) {
      __typename
      ... on AppError { code message }
      ... on Deleted { id }
    }
  }
`);

export const RestWorkspaceStats = graphql(`
  query RestWorkspaceStats($id: ID!) {
    result: workspace(id: $id) {
      stats {
        workspace_id: workspaceId
        document_count: documentCount
        chunk_count: chunkCount
        embedded_chunk_count: embeddedChunkCount
        total_size_bytes: totalSizeBytes
        processing_status: processingStatus
        documents_by_status: documentsByStatus { queued processing ready failed }
        ocr { documents pages_done: pagesDone pages_total: pagesTotal }
      }
    }
  }
`);

export const RestWorkspaceScan = graphql(`
  query RestWorkspaceScan($id: ID!) {
    result: workspace(id: $id) {
      scan {
        workspace_id: workspaceId
        embedding {
          model
          dimensions
          index
          index_model: indexModel
          index_dimensions: indexDimensions
          model_mismatch: modelMismatch
        }
        documents {
          document_id: documentId
          filename
          status
          chunk_count: chunkCount
          embedded_chunks: embeddedChunks
          indexed_chunks: indexedChunks
        }
        totals {
          document_count: documentCount
          chunk_count: chunkCount
          embedded_chunks: embeddedChunks
          indexed_chunks: indexedChunks
        }
      }
    }
  }
`);

export const workspaceRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/v1/kb/workspaces',
    tag: 'Workspaces',
    summary: "The caller's workspaces, newest first.",
    operation: RestListWorkspaces,
    query: listQuery,
    variables: ({ query }: RestRequest<Listed>) => listVariables(query),
    response: respond.list(),
  }),
  route({
    method: 'POST',
    path: '/v1/kb/workspaces',
    tag: 'Workspaces',
    summary: 'Creates a workspace; names are unique per user regardless of case (409).',
    operation: RestCreateWorkspace,
    raises: ['conflict'],
    idempotent: true,
    body: jsonBody('WorkspaceInput', { name: 'name' }),
    variables: ({ body }) => ({ input: body as WorkspaceInput }),
    response: respond.json(201),
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id',
    tag: 'Workspaces',
    summary: 'One workspace.',
    operation: RestGetWorkspace,
    raises: ['not_found'],
    variables: idParam,
    response: respond.json(200),
  }),
  route({
    method: 'PATCH',
    path: '/v1/kb/workspaces/:id',
    tag: 'Workspaces',
    summary: 'Renames a workspace.',
    operation: RestUpdateWorkspace,
    raises: ['not_found', 'conflict'],
    body: jsonBody('WorkspaceInput', { name: 'name' }),
    variables: ({ params, body }) => ({ id: params.id!, input: body as WorkspaceInput }),
    response: respond.json(200),
  }),
  route({
    method: 'DELETE',
    path: '/v1/kb/workspaces/:id',
    tag: 'Workspaces',
    summary: 'Deletes a workspace with its documents, chunks and index entries.',
    operation: RestDeleteWorkspace,
    raises: ['not_found'],
    variables: idParam,
    response: respond.empty(),
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id/stats',
    tag: 'Workspaces',
    summary: "A workspace's document, chunk and size counts and its processing status.",
    operation: RestWorkspaceStats,
    raises: ['not_found'],
    variables: idParam,
    response: respond.field('stats'),
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id/scan',
    tag: 'Workspaces',
    summary: 'Checks a workspace: per document, its chunks, embeddings and index entries, and the embedding model in use.',
    operation: RestWorkspaceScan,
    raises: ['not_found'],
    variables: idParam,
    response: respond.field('scan'),
  }),
];
