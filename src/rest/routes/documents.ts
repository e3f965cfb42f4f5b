// Documents: upload, list, read, rename, delete, the uploaded file, a retry of a failed one.
import type { UpdateDocumentInput } from '../../generated/graphql/graphql.js';
import { graphql } from '../../generated/graphql/gql.js';
import { listQuery, requiredParameter } from '../request-input.js';
import { idParam, jsonBody, listVariables, route, type Listed, type RestRequest, type Route } from '../route.js';
import * as respond from '../response-kinds.js';
import type { UploadBody } from '../upload-body.js';

/** The variables of an endpoint on a document that names its workspace (`?workspace_id=`). */
export const documentInWorkspace = ({ params, query }: RestRequest<{ workspace_id: string }>) => ({ id: params.id!, workspaceId: query.workspace_id });

export const workspaceIdQuery = { workspace_id: requiredParameter.describe('The workspace that holds the document.') };

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

export const RestUpdateDocument = graphql(`
  mutation RestUpdateDocument($id: ID!, $input: UpdateDocumentInput!) {
    result: updateDocument(id: $id, input: $input) {
      __typename
      ... on AppError { code message }
      ... on Document { ...RestDocumentFields }
    }
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

export const documentRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/v1/kb/workspaces/:id/documents',
    tag: 'Documents',
    summary: 'Uploads documents: they are answered at once as queued, then parsed, chunked and embedded in the background.',
    description:
      'Either `multipart/form-data` with one or more `file` parts and an optional `metadata` part (a JSON object applied to every file), or JSON `{filename, content, metadata?}` for a text document.',
    operation: RestUploadDocuments,
    raises: ['not_found'],
    idempotent: true,
    body: { kind: 'upload' },
    variables: ({ params, body }: RestRequest<Record<string, unknown>, UploadBody>) => ({
      workspaceId: params.id!,
      files: body.files,
      metadata: body.metadata ?? null,
    }),
    response: respond.json(202),
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id/documents',
    tag: 'Documents',
    summary: "A workspace's documents, newest first, with their processing status.",
    operation: RestListDocuments,
    raises: ['not_found'],
    query: listQuery,
    variables: ({ params, query }: RestRequest<Listed>) => ({ workspaceId: params.id!, ...listVariables(query) }),
    response: respond.list(),
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id',
    tag: 'Documents',
    summary: "A document's metadata and processing status.",
    operation: RestGetDocument,
    raises: ['not_found'],
    variables: idParam,
    response: respond.json(200),
  }),
  route({
    method: 'PATCH',
    path: '/v1/kb/documents/:id',
    tag: 'Documents',
    summary: 'Renames a document or replaces its metadata; a field left out stays as it is.',
    description:
      "`metadata` replaces the document's metadata as a whole (null clears it); the metadata filter of searches reads it at once. A renamed `ready` document is embedded again, since its name is part of what its chunks are indexed with: it stays `ready` and searchable under its old vectors meanwhile, `embedded_chunks` counting up to `chunk_count` again. A document that is `queued` or `processing`, or still being indexed after an earlier rename, cannot be renamed (409 `document_busy`); a `failed` one takes the new name when it is retried. `content_type` stays the uploaded file's.",
    operation: RestUpdateDocument,
    raises: ['not_found', 'document_busy'],
    body: jsonBody('UpdateDocumentInput', { filename: 'filename', metadata: 'metadata' }),
    variables: ({ params, body }) => ({ id: params.id!, input: body as UpdateDocumentInput }),
    response: respond.json(200),
  }),
  route({
    method: 'DELETE',
    path: '/v1/kb/documents/:id',
    tag: 'Documents',
    summary: 'Deletes a document with its chunks and index entries.',
    operation: RestDeleteDocument,
    raises: ['not_found'],
    variables: idParam,
    response: respond.empty(),
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/file',
    tag: 'Documents',
    summary: 'The file a document was made from, byte for byte, with its type and name.',
    description:
      "The body is the uploaded bytes, streamed from the store as the client reads them; `Content-Type` is the document's `content_type` (text types with their charset), `Content-Length` its `size_bytes`. `Content-Disposition` gives the file name (`filename*` in UTF-8, an ASCII `filename` beside it): `inline` for text and JSON, `attachment` for PDF and DOCX, so that a browser does not open a PDF in its PDF viewer, which would run the PDF's scripts. It is served sandboxed (`Content-Security-Policy: sandbox; default-src 'none'`, `X-Content-Type-Options: nosniff`): an uploaded HTML page opened from here runs no script and loads nothing.",
    operation: RestDocumentFile,
    raises: ['not_found'],
    query: workspaceIdQuery,
    variables: documentInWorkspace,
    response: respond.file(),
  }),
  route({
    method: 'POST',
    path: '/v1/kb/documents/:id/retry',
    tag: 'Documents',
    summary: 'Processes a failed document again from its uploaded bytes: answered at once as queued.',
    description:
      'Only a document whose `status` is `failed`: it goes back to `queued` with its `error` cleared, and is parsed, chunked and embedded again from the start. Any other status is a 409 `document_not_failed`; of retries sent at once, one queues the document and the others get that 409. `Idempotency-Key` is not taken: a retry sent again finds the document no longer failed and changes nothing.',
    operation: RestRetryDocument,
    raises: ['not_found', 'document_not_failed'],
    query: workspaceIdQuery,
    variables: documentInWorkspace,
    response: respond.json(202),
  }),
];
