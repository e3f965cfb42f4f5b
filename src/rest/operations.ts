// The GraphQL operations behind the REST endpoints. Each aliases its root field to `result`
// and its fields to the REST names, so a response body is the selection itself.
import type { DocumentNode } from 'graphql';
import { graphql } from '../generated/graphql/gql.js';


export const RestGetMe = graphql(`
  query RestGetMe {
    result: me { id email name phone creditsBalance created_at: createdAt }
  }
`);

export const RestUpdateMe = graphql(`
  mutation RestUpdateMe($input: UpdateMeInput!) {
    result: updateMe(input: $input) {
      __typename
      ... on AppError { code message }
      ... on User { id email name phone creditsBalance created_at: createdAt }
    }
  }
`);

export const RestGetCredits = graphql(`
  query RestGetCredits {
    result: me {
      credits {
        balance
        subscription { plan status current_period_end: currentPeriodEnd }
        totals { granted used }
        recent { id amount reason job_id: jobId created_at: createdAt }
      }
    }
  }
`);

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

export const RestDocumentFields = graphql(`
  fragment RestDocumentFields on Document {
    id
    workspace_id: workspaceId
    filename
    content_type: contentType
    size_bytes: sizeBytes
    sha256
    status
    stage
    error
    page_count: pageCount
    chunk_count: chunkCount
    embedded_chunks: embeddedChunks
    ocr_pages_done: ocrPagesDone
    ocr_pages_total: ocrPagesTotal
    metadata
    created_at: createdAt
    updated_at: updatedAt
  }
`);

export const RestChunkFields = graphql(`
  fragment RestChunkFields on Chunk {
    document_id: documentId
    chunk_index: chunkIndex
    content
    token_count: tokenCount
    metadata
  }
`);

export const RestUploadDocuments = graphql(`
  mutation RestUploadDocuments($workspaceId: ID!, $files: [File!]!, $metadata: JSON) {
    result: uploadDocuments(workspaceId: $workspaceId, files: $files, metadata: $metadata) { ...RestDocumentFields }
  }
`);

export const RestListDocuments = graphql(`
  query RestListDocuments($workspaceId: ID!, $first: Int, $after: String) {
    result: documents(workspaceId: $workspaceId, first: $first, after: $after) {
      pageInfo { hasNextPage endCursor }
      edges { node { ...RestDocumentFields } }
    }
  }
`);

export const RestGetDocument = graphql(`
  query RestGetDocument($id: ID!) {
    result: document(id: $id) { ...RestDocumentFields }
  }
`);

export const RestDeleteDocument = graphql(`
  mutation RestDeleteDocument($id: ID!) {
    result: deleteDocument(id: $id) {
      __typename
      ... on AppError { code message }
      ... on Deleted { id }
    }
  }
`);

// The file's headers; its bytes are streamed from the store by the REST layer (handler.ts, a `file` response).
export const RestDocumentFile = graphql(`
  query RestDocumentFile($id: ID!, $workspaceId: ID!) {
    result: documentFile(id: $id, workspaceId: $workspaceId) { document_id: documentId filename content_type: contentType size_bytes: sizeBytes }
  }
`);

export const RestRetryDocument = graphql(`
  mutation RestRetryDocument($id: ID!, $workspaceId: ID!) {
    result: retryDocument(id: $id, workspaceId: $workspaceId) {
      __typename
      ... on AppError { code message }
      ... on Document { ...RestDocumentFields }
    }
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

/** The alias of each event's SSE `id:` line in the stream operations; the REST layer takes it out of the `data:` line. */
export const eventIdAlias = 'event_id';

// `event_id` (eventIdAlias) is each event's SSE `id:` line (the REST layer takes it out of the `data:` line).
export const RestAgentEvent = graphql(`
  fragment RestAgentEvent on AgentEvent {
    ... on AgentJobStarted { event_id: eventId type jobId }
    ... on AgentReasoning {
      event_id: eventId
      type
      steps {
        index
        kind
        queries
        found { document_id: documentId filename chunk_index: chunkIndex page score }
        decision
        reason
      }
    }
    ... on AgentToken { event_id: eventId type content }
    ... on AgentSources {
      event_id: eventId
      type
      sources {
        doc_id: documentId
        filename
        pages
        passages { citation chunk_index: chunkIndex page cells quote start end }
      }
    }
    ... on AgentDone { event_id: eventId type jobId sessionId creditsUsed support_score: supportScore rewritten_query: rewrittenQuery }
    ... on AgentError { event_id: eventId type code message }
  }
`);

export const RestAgentStream = graphql(`
  subscription RestAgentStream($input: AgentStreamInput!, $lastEventId: String) {
    result: agentStream(input: $input, lastEventId: $lastEventId) { ...RestAgentEvent }
  }
`);

// The same events, field for field, as POST /agent/stream sends them.
export const RestAgentJobEvents = graphql(`
  subscription RestAgentJobEvents($id: ID!, $after: Int) {
    result: agentJobEvents(id: $id, after: $after) { ...RestAgentEvent }
  }
`);

export const RestGetAgentJob = graphql(`
  query RestGetAgentJob($id: ID!, $withEvents: Boolean!, $after: Int, $first: Int) {
    result: agentJob(id: $id) {
      id
      status
      mode
      session_id: sessionId
      resumable
      credits_reserved: creditsReserved
      credits_used: creditsUsed
      error
      created_at: createdAt
      finished_at: finishedAt
      event_count: eventCount
      events(after: $after, first: $first) @include(if: $withEvents) { id seq created_at: createdAt data }
    }
  }
`);

const restOperations = { RestAgentStream, RestAgentJobEvents, RestGetAgentJob, RestGetMe, RestUpdateMe, RestGetCredits, RestListApiKeys, RestCreateApiKey, RestRevokeApiKey, RestListWorkspaces, RestGetWorkspace, RestCreateWorkspace, RestUpdateWorkspace, RestDeleteWorkspace, RestWorkspaceStats, RestWorkspaceScan, RestListChatSessions, RestGetChatSession, RestCreateChatSession, RestDeleteChatSession, RestSendChatMessage, RestUploadDocuments, RestListDocuments, RestGetDocument, RestDeleteDocument, RestDocumentFile, RestRetryDocument, RestDocumentPreview, RestDocumentChunks, RestChunkContext, RestGrepDocument, RestSearch };

/**
 * The operations above by their codegen hash, for Yoga's persisted-operation lookup. These
 * documents keep the field order they were written in, so REST bodies list fields in the
 * documented order (codegen's JSON manifest normalises documents and sorts their fields).
 */
export function persistedOperations(): Map<string, DocumentNode> {
  const documents = new Map<string, DocumentNode>();
  for (const [name, value] of Object.entries(restOperations)) {
    const hash = (value as { __meta__?: { hash?: string } }).__meta__?.hash;
    if (!hash) throw new Error(`REST operation ${name} has no persisted hash: run npm run codegen`);
    documents.set(hash, value as DocumentNode);
  }
  return documents;
}
