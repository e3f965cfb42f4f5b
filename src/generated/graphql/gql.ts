/* eslint-disable */
import * as types from './graphql.js';
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';

/**
 * Map of all GraphQL operations in the project.
 *
 * This map has several performance disadvantages:
 * 1. It is not tree-shakeable, so it will include all operations in the project.
 * 2. It is not minifiable, so the string of a GraphQL query will be multiple times inside the bundle.
 * 3. It does not support dead code elimination, so it will add unused operations.
 *
 * Therefore it is highly recommended to use the babel or swc plugin for production.
 * Learn more about it here: https://the-guild.dev/graphql/codegen/plugins/presets/preset-client#reducing-bundle-size
 */
type Documents = {
    "\n  query RestGetMe {\n    result: me { id email name phone creditsBalance created_at: createdAt }\n  }\n": typeof types.RestGetMeDocument,
    "\n  mutation RestUpdateMe($input: UpdateMeInput!) {\n    result: updateMe(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on User { id email name phone creditsBalance created_at: createdAt }\n    }\n  }\n": typeof types.RestUpdateMeDocument,
    "\n  query RestGetCredits {\n    result: me {\n      credits {\n        balance\n        subscription { plan status current_period_end: currentPeriodEnd }\n        totals { granted used }\n        recent { id amount reason job_id: jobId created_at: createdAt }\n      }\n    }\n  }\n": typeof types.RestGetCreditsDocument,
    "\n  query RestListApiKeys($first: Int, $after: String) {\n    result: apiKeys(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { id name display_key: displayKey scopes last_used_at: lastUsedAt created_at: createdAt } }\n    }\n  }\n": typeof types.RestListApiKeysDocument,
    "\n  mutation RestCreateApiKey($input: CreateApiKeyInput!) {\n    result: createApiKey(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on NewApiKey { id name display_key: displayKey raw_key: rawKey scopes }\n    }\n  }\n": typeof types.RestCreateApiKeyDocument,
    "\n  mutation RestRevokeApiKey($id: ID!) {\n    result: revokeApiKey(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n": typeof types.RestRevokeApiKeyDocument,
    "\n  query RestListWorkspaces($first: Int, $after: String) {\n    result: workspaces(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { id name created_at: createdAt updated_at: updatedAt } }\n    }\n  }\n": typeof types.RestListWorkspacesDocument,
    "\n  query RestGetWorkspace($id: ID!) {\n    result: workspace(id: $id) { id name created_at: createdAt updated_at: updatedAt }\n  }\n": typeof types.RestGetWorkspaceDocument,
    "\n  mutation RestCreateWorkspace($input: WorkspaceInput!) {\n    result: createWorkspace(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }\n    }\n  }\n": typeof types.RestCreateWorkspaceDocument,
    "\n  mutation RestUpdateWorkspace($id: ID!, $input: WorkspaceInput!) {\n    result: updateWorkspace(id: $id, input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }\n    }\n  }\n": typeof types.RestUpdateWorkspaceDocument,
    "\n  mutation RestDeleteWorkspace($id: ID!) {\n    result: deleteWorkspace(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n": typeof types.RestDeleteWorkspaceDocument,
    "\n  query RestWorkspaceStats($id: ID!) {\n    result: workspace(id: $id) {\n      stats {\n        workspace_id: workspaceId\n        document_count: documentCount\n        chunk_count: chunkCount\n        embedded_chunk_count: embeddedChunkCount\n        total_size_bytes: totalSizeBytes\n        processing_status: processingStatus\n        documents_by_status: documentsByStatus { queued processing ready failed }\n      }\n    }\n  }\n": typeof types.RestWorkspaceStatsDocument,
    "\n  query RestWorkspaceScan($id: ID!) {\n    result: workspace(id: $id) {\n      scan {\n        workspace_id: workspaceId\n        embedding {\n          model\n          dimensions\n          index\n          index_model: indexModel\n          index_dimensions: indexDimensions\n          model_mismatch: modelMismatch\n        }\n        documents {\n          document_id: documentId\n          filename\n          status\n          chunk_count: chunkCount\n          embedded_chunks: embeddedChunks\n          indexed_chunks: indexedChunks\n        }\n        totals {\n          document_count: documentCount\n          chunk_count: chunkCount\n          embedded_chunks: embeddedChunks\n          indexed_chunks: indexedChunks\n        }\n      }\n    }\n  }\n": typeof types.RestWorkspaceScanDocument,
    "\n  query RestListChatSessions($first: Int, $after: String) {\n    result: chatSessions(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges {\n        node { id title workspace_ids: workspaceIds created_at: createdAt updated_at: updatedAt message_count: messageCount }\n      }\n    }\n  }\n": typeof types.RestListChatSessionsDocument,
    "\n  query RestGetChatSession($id: ID!) {\n    result: chatSession(id: $id) {\n      id\n      title\n      workspace_ids: workspaceIds\n      created_at: createdAt\n      updated_at: updatedAt\n      message_count: messageCount\n      messages { id role content sources created_at: createdAt }\n    }\n  }\n": typeof types.RestGetChatSessionDocument,
    "\n  mutation RestCreateChatSession($input: CreateChatSessionInput) {\n    result: createChatSession(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on ChatSession {\n        id\n        title\n        workspace_ids: workspaceIds\n        created_at: createdAt\n        updated_at: updatedAt\n        message_count: messageCount\n      }\n    }\n  }\n": typeof types.RestCreateChatSessionDocument,
    "\n  mutation RestDeleteChatSession($id: ID!) {\n    result: deleteChatSession(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n": typeof types.RestDeleteChatSessionDocument,
    "\n  mutation RestSendChatMessage($sessionId: ID!, $input: SendChatMessageInput!) {\n    result: sendChatMessage(sessionId: $sessionId, input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on ChatMessage { id role content sources created_at: createdAt }\n    }\n  }\n": typeof types.RestSendChatMessageDocument,
    "\n  fragment RestDocumentFields on Document {\n    id\n    workspace_id: workspaceId\n    filename\n    content_type: contentType\n    size_bytes: sizeBytes\n    sha256\n    status\n    error\n    page_count: pageCount\n    chunk_count: chunkCount\n    embedded_chunks: embeddedChunks\n    metadata\n    created_at: createdAt\n    updated_at: updatedAt\n  }\n": typeof types.RestDocumentFieldsFragmentDoc,
    "\n  fragment RestChunkFields on Chunk {\n    document_id: documentId\n    chunk_index: chunkIndex\n    content\n    token_count: tokenCount\n    metadata\n  }\n": typeof types.RestChunkFieldsFragmentDoc,
    "\n  mutation RestUploadDocuments($workspaceId: ID!, $files: [File!]!, $metadata: JSON) {\n    result: uploadDocuments(workspaceId: $workspaceId, files: $files, metadata: $metadata) { ...RestDocumentFields }\n  }\n": typeof types.RestUploadDocumentsDocument,
    "\n  query RestListDocuments($workspaceId: ID!, $first: Int, $after: String) {\n    result: documents(workspaceId: $workspaceId, first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { ...RestDocumentFields } }\n    }\n  }\n": typeof types.RestListDocumentsDocument,
    "\n  query RestGetDocument($id: ID!) {\n    result: document(id: $id) { ...RestDocumentFields }\n  }\n": typeof types.RestGetDocumentDocument,
    "\n  mutation RestDeleteDocument($id: ID!) {\n    result: deleteDocument(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n": typeof types.RestDeleteDocumentDocument,
    "\n  query RestDocumentPreview($id: ID!, $workspaceId: ID!, $chunks: Int) {\n    result: documentPreview(id: $id, workspaceId: $workspaceId, chunks: $chunks) {\n      document { ...RestDocumentFields }\n      content\n      chunks { ...RestChunkFields }\n    }\n  }\n": typeof types.RestDocumentPreviewDocument,
    "\n  query RestDocumentChunks($id: ID!, $workspaceId: ID!, $first: Int, $after: String) {\n    result: documentChunks(id: $id, workspaceId: $workspaceId, first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { ...RestChunkFields } }\n    }\n  }\n": typeof types.RestDocumentChunksDocument,
    "\n  query RestChunkContext($documentId: ID!, $workspaceId: ID!, $chunkIndex: Int!, $before: Int, $after: Int) {\n    result: chunkContext(documentId: $documentId, workspaceId: $workspaceId, chunkIndex: $chunkIndex, before: $before, after: $after) {\n      document_id: documentId\n      chunk_index: chunkIndex\n      chunks {\n        document_id: documentId\n        chunk_index: chunkIndex\n        content\n        token_count: tokenCount\n        metadata\n        is_target: isTarget\n      }\n    }\n  }\n": typeof types.RestChunkContextDocument,
    "\n  query RestGrepDocument($documentId: ID!, $workspaceId: ID!, $pattern: String!, $caseSensitive: Boolean) {\n    result: grepDocument(documentId: $documentId, workspaceId: $workspaceId, pattern: $pattern, caseSensitive: $caseSensitive) {\n      document_id: documentId\n      pattern\n      case_sensitive: caseSensitive\n      total_matches: totalMatches\n      truncated\n      chunks { chunk_index: chunkIndex content highlighted matches { start end } metadata }\n    }\n  }\n": typeof types.RestGrepDocumentDocument,
    "\n  query RestSearch($input: SearchInput!) {\n    result: search(input: $input) {\n      document_id: documentId\n      filename\n      chunk_index: chunkIndex\n      content\n      score\n      metadata\n    }\n  }\n": typeof types.RestSearchDocument,
};
const documents: Documents = {
    "\n  query RestGetMe {\n    result: me { id email name phone creditsBalance created_at: createdAt }\n  }\n": types.RestGetMeDocument,
    "\n  mutation RestUpdateMe($input: UpdateMeInput!) {\n    result: updateMe(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on User { id email name phone creditsBalance created_at: createdAt }\n    }\n  }\n": types.RestUpdateMeDocument,
    "\n  query RestGetCredits {\n    result: me {\n      credits {\n        balance\n        subscription { plan status current_period_end: currentPeriodEnd }\n        totals { granted used }\n        recent { id amount reason job_id: jobId created_at: createdAt }\n      }\n    }\n  }\n": types.RestGetCreditsDocument,
    "\n  query RestListApiKeys($first: Int, $after: String) {\n    result: apiKeys(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { id name display_key: displayKey scopes last_used_at: lastUsedAt created_at: createdAt } }\n    }\n  }\n": types.RestListApiKeysDocument,
    "\n  mutation RestCreateApiKey($input: CreateApiKeyInput!) {\n    result: createApiKey(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on NewApiKey { id name display_key: displayKey raw_key: rawKey scopes }\n    }\n  }\n": types.RestCreateApiKeyDocument,
    "\n  mutation RestRevokeApiKey($id: ID!) {\n    result: revokeApiKey(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n": types.RestRevokeApiKeyDocument,
    "\n  query RestListWorkspaces($first: Int, $after: String) {\n    result: workspaces(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { id name created_at: createdAt updated_at: updatedAt } }\n    }\n  }\n": types.RestListWorkspacesDocument,
    "\n  query RestGetWorkspace($id: ID!) {\n    result: workspace(id: $id) { id name created_at: createdAt updated_at: updatedAt }\n  }\n": types.RestGetWorkspaceDocument,
    "\n  mutation RestCreateWorkspace($input: WorkspaceInput!) {\n    result: createWorkspace(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }\n    }\n  }\n": types.RestCreateWorkspaceDocument,
    "\n  mutation RestUpdateWorkspace($id: ID!, $input: WorkspaceInput!) {\n    result: updateWorkspace(id: $id, input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }\n    }\n  }\n": types.RestUpdateWorkspaceDocument,
    "\n  mutation RestDeleteWorkspace($id: ID!) {\n    result: deleteWorkspace(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n": types.RestDeleteWorkspaceDocument,
    "\n  query RestWorkspaceStats($id: ID!) {\n    result: workspace(id: $id) {\n      stats {\n        workspace_id: workspaceId\n        document_count: documentCount\n        chunk_count: chunkCount\n        embedded_chunk_count: embeddedChunkCount\n        total_size_bytes: totalSizeBytes\n        processing_status: processingStatus\n        documents_by_status: documentsByStatus { queued processing ready failed }\n      }\n    }\n  }\n": types.RestWorkspaceStatsDocument,
    "\n  query RestWorkspaceScan($id: ID!) {\n    result: workspace(id: $id) {\n      scan {\n        workspace_id: workspaceId\n        embedding {\n          model\n          dimensions\n          index\n          index_model: indexModel\n          index_dimensions: indexDimensions\n          model_mismatch: modelMismatch\n        }\n        documents {\n          document_id: documentId\n          filename\n          status\n          chunk_count: chunkCount\n          embedded_chunks: embeddedChunks\n          indexed_chunks: indexedChunks\n        }\n        totals {\n          document_count: documentCount\n          chunk_count: chunkCount\n          embedded_chunks: embeddedChunks\n          indexed_chunks: indexedChunks\n        }\n      }\n    }\n  }\n": types.RestWorkspaceScanDocument,
    "\n  query RestListChatSessions($first: Int, $after: String) {\n    result: chatSessions(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges {\n        node { id title workspace_ids: workspaceIds created_at: createdAt updated_at: updatedAt message_count: messageCount }\n      }\n    }\n  }\n": types.RestListChatSessionsDocument,
    "\n  query RestGetChatSession($id: ID!) {\n    result: chatSession(id: $id) {\n      id\n      title\n      workspace_ids: workspaceIds\n      created_at: createdAt\n      updated_at: updatedAt\n      message_count: messageCount\n      messages { id role content sources created_at: createdAt }\n    }\n  }\n": types.RestGetChatSessionDocument,
    "\n  mutation RestCreateChatSession($input: CreateChatSessionInput) {\n    result: createChatSession(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on ChatSession {\n        id\n        title\n        workspace_ids: workspaceIds\n        created_at: createdAt\n        updated_at: updatedAt\n        message_count: messageCount\n      }\n    }\n  }\n": types.RestCreateChatSessionDocument,
    "\n  mutation RestDeleteChatSession($id: ID!) {\n    result: deleteChatSession(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n": types.RestDeleteChatSessionDocument,
    "\n  mutation RestSendChatMessage($sessionId: ID!, $input: SendChatMessageInput!) {\n    result: sendChatMessage(sessionId: $sessionId, input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on ChatMessage { id role content sources created_at: createdAt }\n    }\n  }\n": types.RestSendChatMessageDocument,
    "\n  fragment RestDocumentFields on Document {\n    id\n    workspace_id: workspaceId\n    filename\n    content_type: contentType\n    size_bytes: sizeBytes\n    sha256\n    status\n    error\n    page_count: pageCount\n    chunk_count: chunkCount\n    embedded_chunks: embeddedChunks\n    metadata\n    created_at: createdAt\n    updated_at: updatedAt\n  }\n": types.RestDocumentFieldsFragmentDoc,
    "\n  fragment RestChunkFields on Chunk {\n    document_id: documentId\n    chunk_index: chunkIndex\n    content\n    token_count: tokenCount\n    metadata\n  }\n": types.RestChunkFieldsFragmentDoc,
    "\n  mutation RestUploadDocuments($workspaceId: ID!, $files: [File!]!, $metadata: JSON) {\n    result: uploadDocuments(workspaceId: $workspaceId, files: $files, metadata: $metadata) { ...RestDocumentFields }\n  }\n": types.RestUploadDocumentsDocument,
    "\n  query RestListDocuments($workspaceId: ID!, $first: Int, $after: String) {\n    result: documents(workspaceId: $workspaceId, first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { ...RestDocumentFields } }\n    }\n  }\n": types.RestListDocumentsDocument,
    "\n  query RestGetDocument($id: ID!) {\n    result: document(id: $id) { ...RestDocumentFields }\n  }\n": types.RestGetDocumentDocument,
    "\n  mutation RestDeleteDocument($id: ID!) {\n    result: deleteDocument(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n": types.RestDeleteDocumentDocument,
    "\n  query RestDocumentPreview($id: ID!, $workspaceId: ID!, $chunks: Int) {\n    result: documentPreview(id: $id, workspaceId: $workspaceId, chunks: $chunks) {\n      document { ...RestDocumentFields }\n      content\n      chunks { ...RestChunkFields }\n    }\n  }\n": types.RestDocumentPreviewDocument,
    "\n  query RestDocumentChunks($id: ID!, $workspaceId: ID!, $first: Int, $after: String) {\n    result: documentChunks(id: $id, workspaceId: $workspaceId, first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { ...RestChunkFields } }\n    }\n  }\n": types.RestDocumentChunksDocument,
    "\n  query RestChunkContext($documentId: ID!, $workspaceId: ID!, $chunkIndex: Int!, $before: Int, $after: Int) {\n    result: chunkContext(documentId: $documentId, workspaceId: $workspaceId, chunkIndex: $chunkIndex, before: $before, after: $after) {\n      document_id: documentId\n      chunk_index: chunkIndex\n      chunks {\n        document_id: documentId\n        chunk_index: chunkIndex\n        content\n        token_count: tokenCount\n        metadata\n        is_target: isTarget\n      }\n    }\n  }\n": types.RestChunkContextDocument,
    "\n  query RestGrepDocument($documentId: ID!, $workspaceId: ID!, $pattern: String!, $caseSensitive: Boolean) {\n    result: grepDocument(documentId: $documentId, workspaceId: $workspaceId, pattern: $pattern, caseSensitive: $caseSensitive) {\n      document_id: documentId\n      pattern\n      case_sensitive: caseSensitive\n      total_matches: totalMatches\n      truncated\n      chunks { chunk_index: chunkIndex content highlighted matches { start end } metadata }\n    }\n  }\n": types.RestGrepDocumentDocument,
    "\n  query RestSearch($input: SearchInput!) {\n    result: search(input: $input) {\n      document_id: documentId\n      filename\n      chunk_index: chunkIndex\n      content\n      score\n      metadata\n    }\n  }\n": types.RestSearchDocument,
};

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 *
 *
 * @example
 * ```ts
 * const query = graphql(`query GetUser($id: ID!) { user(id: $id) { name } }`);
 * ```
 *
 * The query argument is unknown!
 * Please regenerate the types.
 */
export function graphql(source: string): unknown;

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestGetMe {\n    result: me { id email name phone creditsBalance created_at: createdAt }\n  }\n"): (typeof documents)["\n  query RestGetMe {\n    result: me { id email name phone creditsBalance created_at: createdAt }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestUpdateMe($input: UpdateMeInput!) {\n    result: updateMe(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on User { id email name phone creditsBalance created_at: createdAt }\n    }\n  }\n"): (typeof documents)["\n  mutation RestUpdateMe($input: UpdateMeInput!) {\n    result: updateMe(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on User { id email name phone creditsBalance created_at: createdAt }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestGetCredits {\n    result: me {\n      credits {\n        balance\n        subscription { plan status current_period_end: currentPeriodEnd }\n        totals { granted used }\n        recent { id amount reason job_id: jobId created_at: createdAt }\n      }\n    }\n  }\n"): (typeof documents)["\n  query RestGetCredits {\n    result: me {\n      credits {\n        balance\n        subscription { plan status current_period_end: currentPeriodEnd }\n        totals { granted used }\n        recent { id amount reason job_id: jobId created_at: createdAt }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestListApiKeys($first: Int, $after: String) {\n    result: apiKeys(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { id name display_key: displayKey scopes last_used_at: lastUsedAt created_at: createdAt } }\n    }\n  }\n"): (typeof documents)["\n  query RestListApiKeys($first: Int, $after: String) {\n    result: apiKeys(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { id name display_key: displayKey scopes last_used_at: lastUsedAt created_at: createdAt } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestCreateApiKey($input: CreateApiKeyInput!) {\n    result: createApiKey(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on NewApiKey { id name display_key: displayKey raw_key: rawKey scopes }\n    }\n  }\n"): (typeof documents)["\n  mutation RestCreateApiKey($input: CreateApiKeyInput!) {\n    result: createApiKey(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on NewApiKey { id name display_key: displayKey raw_key: rawKey scopes }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestRevokeApiKey($id: ID!) {\n    result: revokeApiKey(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n"): (typeof documents)["\n  mutation RestRevokeApiKey($id: ID!) {\n    result: revokeApiKey(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestListWorkspaces($first: Int, $after: String) {\n    result: workspaces(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { id name created_at: createdAt updated_at: updatedAt } }\n    }\n  }\n"): (typeof documents)["\n  query RestListWorkspaces($first: Int, $after: String) {\n    result: workspaces(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { id name created_at: createdAt updated_at: updatedAt } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestGetWorkspace($id: ID!) {\n    result: workspace(id: $id) { id name created_at: createdAt updated_at: updatedAt }\n  }\n"): (typeof documents)["\n  query RestGetWorkspace($id: ID!) {\n    result: workspace(id: $id) { id name created_at: createdAt updated_at: updatedAt }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestCreateWorkspace($input: WorkspaceInput!) {\n    result: createWorkspace(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }\n    }\n  }\n"): (typeof documents)["\n  mutation RestCreateWorkspace($input: WorkspaceInput!) {\n    result: createWorkspace(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestUpdateWorkspace($id: ID!, $input: WorkspaceInput!) {\n    result: updateWorkspace(id: $id, input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }\n    }\n  }\n"): (typeof documents)["\n  mutation RestUpdateWorkspace($id: ID!, $input: WorkspaceInput!) {\n    result: updateWorkspace(id: $id, input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on Workspace { id name created_at: createdAt updated_at: updatedAt }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestDeleteWorkspace($id: ID!) {\n    result: deleteWorkspace(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n"): (typeof documents)["\n  mutation RestDeleteWorkspace($id: ID!) {\n    result: deleteWorkspace(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestWorkspaceStats($id: ID!) {\n    result: workspace(id: $id) {\n      stats {\n        workspace_id: workspaceId\n        document_count: documentCount\n        chunk_count: chunkCount\n        embedded_chunk_count: embeddedChunkCount\n        total_size_bytes: totalSizeBytes\n        processing_status: processingStatus\n        documents_by_status: documentsByStatus { queued processing ready failed }\n      }\n    }\n  }\n"): (typeof documents)["\n  query RestWorkspaceStats($id: ID!) {\n    result: workspace(id: $id) {\n      stats {\n        workspace_id: workspaceId\n        document_count: documentCount\n        chunk_count: chunkCount\n        embedded_chunk_count: embeddedChunkCount\n        total_size_bytes: totalSizeBytes\n        processing_status: processingStatus\n        documents_by_status: documentsByStatus { queued processing ready failed }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestWorkspaceScan($id: ID!) {\n    result: workspace(id: $id) {\n      scan {\n        workspace_id: workspaceId\n        embedding {\n          model\n          dimensions\n          index\n          index_model: indexModel\n          index_dimensions: indexDimensions\n          model_mismatch: modelMismatch\n        }\n        documents {\n          document_id: documentId\n          filename\n          status\n          chunk_count: chunkCount\n          embedded_chunks: embeddedChunks\n          indexed_chunks: indexedChunks\n        }\n        totals {\n          document_count: documentCount\n          chunk_count: chunkCount\n          embedded_chunks: embeddedChunks\n          indexed_chunks: indexedChunks\n        }\n      }\n    }\n  }\n"): (typeof documents)["\n  query RestWorkspaceScan($id: ID!) {\n    result: workspace(id: $id) {\n      scan {\n        workspace_id: workspaceId\n        embedding {\n          model\n          dimensions\n          index\n          index_model: indexModel\n          index_dimensions: indexDimensions\n          model_mismatch: modelMismatch\n        }\n        documents {\n          document_id: documentId\n          filename\n          status\n          chunk_count: chunkCount\n          embedded_chunks: embeddedChunks\n          indexed_chunks: indexedChunks\n        }\n        totals {\n          document_count: documentCount\n          chunk_count: chunkCount\n          embedded_chunks: embeddedChunks\n          indexed_chunks: indexedChunks\n        }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestListChatSessions($first: Int, $after: String) {\n    result: chatSessions(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges {\n        node { id title workspace_ids: workspaceIds created_at: createdAt updated_at: updatedAt message_count: messageCount }\n      }\n    }\n  }\n"): (typeof documents)["\n  query RestListChatSessions($first: Int, $after: String) {\n    result: chatSessions(first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges {\n        node { id title workspace_ids: workspaceIds created_at: createdAt updated_at: updatedAt message_count: messageCount }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestGetChatSession($id: ID!) {\n    result: chatSession(id: $id) {\n      id\n      title\n      workspace_ids: workspaceIds\n      created_at: createdAt\n      updated_at: updatedAt\n      message_count: messageCount\n      messages { id role content sources created_at: createdAt }\n    }\n  }\n"): (typeof documents)["\n  query RestGetChatSession($id: ID!) {\n    result: chatSession(id: $id) {\n      id\n      title\n      workspace_ids: workspaceIds\n      created_at: createdAt\n      updated_at: updatedAt\n      message_count: messageCount\n      messages { id role content sources created_at: createdAt }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestCreateChatSession($input: CreateChatSessionInput) {\n    result: createChatSession(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on ChatSession {\n        id\n        title\n        workspace_ids: workspaceIds\n        created_at: createdAt\n        updated_at: updatedAt\n        message_count: messageCount\n      }\n    }\n  }\n"): (typeof documents)["\n  mutation RestCreateChatSession($input: CreateChatSessionInput) {\n    result: createChatSession(input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on ChatSession {\n        id\n        title\n        workspace_ids: workspaceIds\n        created_at: createdAt\n        updated_at: updatedAt\n        message_count: messageCount\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestDeleteChatSession($id: ID!) {\n    result: deleteChatSession(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n"): (typeof documents)["\n  mutation RestDeleteChatSession($id: ID!) {\n    result: deleteChatSession(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestSendChatMessage($sessionId: ID!, $input: SendChatMessageInput!) {\n    result: sendChatMessage(sessionId: $sessionId, input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on ChatMessage { id role content sources created_at: createdAt }\n    }\n  }\n"): (typeof documents)["\n  mutation RestSendChatMessage($sessionId: ID!, $input: SendChatMessageInput!) {\n    result: sendChatMessage(sessionId: $sessionId, input: $input) {\n      __typename\n      ... on AppError { code message }\n      ... on ChatMessage { id role content sources created_at: createdAt }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment RestDocumentFields on Document {\n    id\n    workspace_id: workspaceId\n    filename\n    content_type: contentType\n    size_bytes: sizeBytes\n    sha256\n    status\n    error\n    page_count: pageCount\n    chunk_count: chunkCount\n    embedded_chunks: embeddedChunks\n    metadata\n    created_at: createdAt\n    updated_at: updatedAt\n  }\n"): (typeof documents)["\n  fragment RestDocumentFields on Document {\n    id\n    workspace_id: workspaceId\n    filename\n    content_type: contentType\n    size_bytes: sizeBytes\n    sha256\n    status\n    error\n    page_count: pageCount\n    chunk_count: chunkCount\n    embedded_chunks: embeddedChunks\n    metadata\n    created_at: createdAt\n    updated_at: updatedAt\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment RestChunkFields on Chunk {\n    document_id: documentId\n    chunk_index: chunkIndex\n    content\n    token_count: tokenCount\n    metadata\n  }\n"): (typeof documents)["\n  fragment RestChunkFields on Chunk {\n    document_id: documentId\n    chunk_index: chunkIndex\n    content\n    token_count: tokenCount\n    metadata\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestUploadDocuments($workspaceId: ID!, $files: [File!]!, $metadata: JSON) {\n    result: uploadDocuments(workspaceId: $workspaceId, files: $files, metadata: $metadata) { ...RestDocumentFields }\n  }\n"): (typeof documents)["\n  mutation RestUploadDocuments($workspaceId: ID!, $files: [File!]!, $metadata: JSON) {\n    result: uploadDocuments(workspaceId: $workspaceId, files: $files, metadata: $metadata) { ...RestDocumentFields }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestListDocuments($workspaceId: ID!, $first: Int, $after: String) {\n    result: documents(workspaceId: $workspaceId, first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { ...RestDocumentFields } }\n    }\n  }\n"): (typeof documents)["\n  query RestListDocuments($workspaceId: ID!, $first: Int, $after: String) {\n    result: documents(workspaceId: $workspaceId, first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { ...RestDocumentFields } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestGetDocument($id: ID!) {\n    result: document(id: $id) { ...RestDocumentFields }\n  }\n"): (typeof documents)["\n  query RestGetDocument($id: ID!) {\n    result: document(id: $id) { ...RestDocumentFields }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestDeleteDocument($id: ID!) {\n    result: deleteDocument(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n"): (typeof documents)["\n  mutation RestDeleteDocument($id: ID!) {\n    result: deleteDocument(id: $id) {\n      __typename\n      ... on AppError { code message }\n      ... on Deleted { id }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestDocumentPreview($id: ID!, $workspaceId: ID!, $chunks: Int) {\n    result: documentPreview(id: $id, workspaceId: $workspaceId, chunks: $chunks) {\n      document { ...RestDocumentFields }\n      content\n      chunks { ...RestChunkFields }\n    }\n  }\n"): (typeof documents)["\n  query RestDocumentPreview($id: ID!, $workspaceId: ID!, $chunks: Int) {\n    result: documentPreview(id: $id, workspaceId: $workspaceId, chunks: $chunks) {\n      document { ...RestDocumentFields }\n      content\n      chunks { ...RestChunkFields }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestDocumentChunks($id: ID!, $workspaceId: ID!, $first: Int, $after: String) {\n    result: documentChunks(id: $id, workspaceId: $workspaceId, first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { ...RestChunkFields } }\n    }\n  }\n"): (typeof documents)["\n  query RestDocumentChunks($id: ID!, $workspaceId: ID!, $first: Int, $after: String) {\n    result: documentChunks(id: $id, workspaceId: $workspaceId, first: $first, after: $after) {\n      pageInfo { hasNextPage endCursor }\n      edges { node { ...RestChunkFields } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestChunkContext($documentId: ID!, $workspaceId: ID!, $chunkIndex: Int!, $before: Int, $after: Int) {\n    result: chunkContext(documentId: $documentId, workspaceId: $workspaceId, chunkIndex: $chunkIndex, before: $before, after: $after) {\n      document_id: documentId\n      chunk_index: chunkIndex\n      chunks {\n        document_id: documentId\n        chunk_index: chunkIndex\n        content\n        token_count: tokenCount\n        metadata\n        is_target: isTarget\n      }\n    }\n  }\n"): (typeof documents)["\n  query RestChunkContext($documentId: ID!, $workspaceId: ID!, $chunkIndex: Int!, $before: Int, $after: Int) {\n    result: chunkContext(documentId: $documentId, workspaceId: $workspaceId, chunkIndex: $chunkIndex, before: $before, after: $after) {\n      document_id: documentId\n      chunk_index: chunkIndex\n      chunks {\n        document_id: documentId\n        chunk_index: chunkIndex\n        content\n        token_count: tokenCount\n        metadata\n        is_target: isTarget\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestGrepDocument($documentId: ID!, $workspaceId: ID!, $pattern: String!, $caseSensitive: Boolean) {\n    result: grepDocument(documentId: $documentId, workspaceId: $workspaceId, pattern: $pattern, caseSensitive: $caseSensitive) {\n      document_id: documentId\n      pattern\n      case_sensitive: caseSensitive\n      total_matches: totalMatches\n      truncated\n      chunks { chunk_index: chunkIndex content highlighted matches { start end } metadata }\n    }\n  }\n"): (typeof documents)["\n  query RestGrepDocument($documentId: ID!, $workspaceId: ID!, $pattern: String!, $caseSensitive: Boolean) {\n    result: grepDocument(documentId: $documentId, workspaceId: $workspaceId, pattern: $pattern, caseSensitive: $caseSensitive) {\n      document_id: documentId\n      pattern\n      case_sensitive: caseSensitive\n      total_matches: totalMatches\n      truncated\n      chunks { chunk_index: chunkIndex content highlighted matches { start end } metadata }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RestSearch($input: SearchInput!) {\n    result: search(input: $input) {\n      document_id: documentId\n      filename\n      chunk_index: chunkIndex\n      content\n      score\n      metadata\n    }\n  }\n"): (typeof documents)["\n  query RestSearch($input: SearchInput!) {\n    result: search(input: $input) {\n      document_id: documentId\n      filename\n      chunk_index: chunkIndex\n      content\n      score\n      metadata\n    }\n  }\n"];

export function graphql(source: string) {
  return (documents as any)[source] ?? {};
}

export type DocumentType<TDocumentNode extends DocumentNode<any, any>> = TDocumentNode extends DocumentNode<  infer TType,  any>  ? TType  : never;