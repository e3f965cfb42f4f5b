// A document's text: its preview, its chunks in order, a chunk in its context, a pattern found in it.
import { graphql } from '../../generated/graphql/gql.js';
import { booleanParameter, countParameter, listQuery, requiredParameter } from '../request-input.js';
import { listVariables, route, type Listed, type RestRequest, type Route } from '../route.js';
import * as respond from '../response-kinds.js';
import { documentInWorkspace, workspaceIdQuery } from './documents.js';

export const RestChunkFields = graphql(`
  fragment RestChunkFields on Chunk {
    document_id: documentId
    chunk_index: chunkIndex
    content
    token_count: tokenCount
    metadata
  }
`);

export const RestDocumentPreview = graphql(`
  query RestDocumentPreview($id: ID!, $workspaceId: ID!, $chunks: Int) {
    result: documentPreview(id: $id, workspaceId: $workspaceId, chunks: $chunks) {
      document { ...RestDocumentFields }
      content
      chunks { ...RestChunkFields }
    }
  }
`);

export const RestDocumentChunks = graphql(`
  query RestDocumentChunks($id: ID!, $workspaceId: ID!, $first: Int, $after: String) {
    result: documentChunks(id: $id, workspaceId: $workspaceId, first: $first, after: $after) {
      pageInfo { hasNextPage endCursor }
      edges { node { ...RestChunkFields } }
    }
  }
`);

export const RestChunkContext = graphql(`
  query RestChunkContext($documentId: ID!, $workspaceId: ID!, $chunkIndex: Int!, $before: Int, $after: Int) {
    result: chunkContext(documentId: $documentId, workspaceId: $workspaceId, chunkIndex: $chunkIndex, before: $before, after: $after) {
      document_id: documentId
      chunk_index: chunkIndex
      chunks {
        document_id: documentId
        chunk_index: chunkIndex
        content
        token_count: tokenCount
        metadata
        is_target: isTarget
      }
    }
  }
`);

export const RestGrepDocument = graphql(`
  query RestGrepDocument($documentId: ID!, $workspaceId: ID!, $pattern: String!, $caseSensitive: Boolean) {
    result: grepDocument(documentId: $documentId, workspaceId: $workspaceId, pattern: $pattern, caseSensitive: $caseSensitive) {
      document_id: documentId
      pattern
      case_sensitive: caseSensitive
      total_matches: totalMatches
      truncated
      chunks { chunk_index: chunkIndex content highlighted matches { start end } metadata }
    }
  }
`);

export const documentTextRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/preview',
    tag: 'Documents',
    summary: "A document's text and its first chunks.",
    operation: RestDocumentPreview,
    raises: ['not_found'],
    query: { ...workspaceIdQuery, chunks: countParameter(10, 1000).describe('How many chunks to include.') },
    variables: (request: RestRequest<{ workspace_id: string; chunks: number }>) => ({ ...documentInWorkspace(request), chunks: request.query.chunks }),
    response: respond.json(200),
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/chunks',
    tag: 'Documents',
    summary: "A document's chunks in order.",
    operation: RestDocumentChunks,
    raises: ['not_found'],
    query: { ...workspaceIdQuery, ...listQuery },
    variables: (request: RestRequest<{ workspace_id: string } & Listed>) => ({ ...documentInWorkspace(request), ...listVariables(request.query) }),
    response: respond.list(),
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/chunks/:chunk_index/context',
    tag: 'Documents',
    summary: 'A chunk with the chunks before and after it.',
    operation: RestChunkContext,
    raises: ['not_found'],
    params: { chunk_index: { pattern: /^\d{1,9}$/, problem: 'must be a non-negative integer', description: 'The chunk\'s position in its document, from 0.' } },
    query: {
      ...workspaceIdQuery,
      before: countParameter(2, 100).describe('Chunks before the target.'),
      after: countParameter(2, 100).describe('Chunks after the target.'),
    },
    variables: (request: RestRequest<{ workspace_id: string; before: number; after: number }>) => {
      const { id, workspaceId } = documentInWorkspace(request);
      const { before, after } = request.query;
      return { documentId: id, workspaceId, chunkIndex: Number(request.params.chunk_index), before, after };
    },
    response: respond.json(200),
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/grep',
    tag: 'Documents',
    summary: "Finds a pattern (RE2 syntax) in a document's chunks, with the matches highlighted.",
    operation: RestGrepDocument,
    raises: ['not_found'],
    query: {
      ...workspaceIdQuery,
      pattern: requiredParameter.describe('A regular expression in RE2 syntax (linear time: no backreferences or lookaround).'),
      case_sensitive: booleanParameter(false),
    },
    variables: (request: RestRequest<{ workspace_id: string; pattern: string; case_sensitive: boolean }>) => {
      const { id, workspaceId } = documentInWorkspace(request);
      return { documentId: id, workspaceId, pattern: request.query.pattern, caseSensitive: request.query.case_sensitive };
    },
    response: respond.json(200),
  }),
];
