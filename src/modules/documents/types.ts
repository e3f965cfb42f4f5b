import { z } from 'zod';
import { badRequest } from '../../errors.js';
import { filenameInput, metadataInput } from '../../input-limits.js';
import { builder } from '../../graphql/builder.js';
import { DeletedRef } from '../../graphql/shared-types.js';
import { viewerOf } from '../../graphql/viewer.js';
import { compileGrepPattern, grepDocument } from './grep.js';
import { chunkContext, deleteDocument, documentSourceBase64, documentStage, findDocument, firstChunks, listChunks, listDocuments } from './service.js';
import { updateDocument } from './update.js';
import { retryDocument, uploadDocuments, type UploadedFile } from './upload.js';

builder.scalarType('File', {
  description: 'A file sent with the GraphQL multipart request specification.',
  serialize: () => {
    throw new Error('File is an input type');
  },
});

const DocumentStageRef = builder.enumType('DocumentStage', {
  description:
    "Where a document is in its processing: `status` with `processing` split in three. Progress while `ocr` is `ocrPagesDone / ocrPagesTotal`, while `embedding` `embeddedChunks / chunkCount`.",
  values: {
    queued: { description: 'Waiting for a worker (status `queued`).' },
    parsing: { description: 'Being parsed and chunked: status `processing`, no chunks stored yet.' },
    ocr: { description: 'Being parsed, its scanned pages read by OCR: status `processing`, no chunks stored yet; `ocrPagesDone` of `ocrPagesTotal` pages gone through.' },
    embedding: { description: 'Chunks stored, being embedded and indexed: status `processing`; `embeddedChunks` of `chunkCount` done.' },
    ready: { description: 'Searchable (status `ready`).' },
    failed: { description: 'Processing failed; `error` says why (status `failed`). `retryDocument` processes it again.' },
  } as const,
});

/** The file a document was made from: what the upload sent, byte for byte. */
type DocumentFile = { id: string; workspaceId: string; filename: string; contentType: string; sizeBytes: number; sha256: string };
const documentFileSelect = { id: true, workspaceId: true, filename: true, contentType: true, sizeBytes: true, sha256: true } as const;

/**
 * What `DocumentFile.base64` costs of an operation's 25,000 (cost.ts): up to two files per
 * operation, never a page of them. What they may hold is the response limit's to say.
 */
const documentFileCost = 10_000;

const DocumentFileRef = builder.objectRef<DocumentFile>('DocumentFile').implement({
  description: 'The file a document was made from, as it was uploaded.',
  fields: (t) => ({
    documentId: t.exposeID('id'),
    filename: t.exposeString('filename'),
    contentType: t.exposeString('contentType', { description: 'The type detected at upload (the document\'s `contentType`).' }),
    sizeBytes: t.exposeInt('sizeBytes'),
    sha256: t.exposeString('sha256', { description: 'SHA-256 of the bytes, hex.' }),
    base64: t.string({
      description: `The bytes, base64-encoded (RFC 4648, padded). Costs ${documentFileCost.toLocaleString('en')} of the operation's cost limit: at most two files per operation. Their base64 must fit in what is left of the response limit (KB_MAX_GRAPHQL_RESPONSE_BYTES, 8 MiB unless configured), checked before any byte is read; a file that does not fit is a bad_request error on this field. REST: GET /v1/kb/documents/{id}/file streams any file as it is.`,
      complexity: documentFileCost,
      resolve: (file, _args, context) => documentSourceBase64(context, viewerOf(context), file, context.responseBudget),
    }),
  }),
});

const DocumentRef = builder.prismaObject('Document', {
  fields: (t) => ({
    id: t.exposeID('id'),
    workspaceId: t.exposeID('workspaceId'),
    filename: t.exposeString('filename'),
    contentType: t.exposeString('contentType'),
    sizeBytes: t.exposeInt('sizeBytes'),
    sha256: t.exposeString('sha256'),
    status: t.exposeString('status', { description: '`queued`, `processing`, `ready` or `failed`.' }),
    stage: t.field({
      type: DocumentStageRef,
      description: '`status` in more detail: `processing` is `parsing` until the chunks are stored (`ocr` while OCR reads pages), then `embedding`.',
      select: { status: true, chunkCount: true, ocrPagesTotal: true },
      resolve: (document) => documentStage(document),
    }),
    error: t.exposeString('error', { nullable: true, description: 'Why processing failed.' }),
    pageCount: t.exposeInt('pageCount', { nullable: true }),
    chunkCount: t.exposeInt('chunkCount'),
    embeddedChunks: t.exposeInt('embeddedChunks', {
      description: 'Chunks embedded and indexed so far: progress while processing; equal to chunkCount once ready.',
    }),
    ocrPagesDone: t.exposeInt('ocrPagesDone', {
      description: 'Pages gone through (by text layer or OCR) while OCR reads the document (stage `ocr`); equal to ocrPagesTotal once parsed. 0 when OCR read none of its pages.',
    }),
    ocrPagesTotal: t.exposeInt('ocrPagesTotal', { description: 'The page count of a document whose pages OCR reads or read; 0 when it read none.' }),
    metadata: t.expose('metadata', { type: 'JSON' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    workspace: t.relation('workspace'),
    file: t.field({
      type: DocumentFileRef,
      description: 'The uploaded file, with its bytes in `base64`. Needs kb:read, wherever the document is reached from (a mutation\'s result included).',
      authScopes: { scope: 'kb:read' },
      select: documentFileSelect,
      resolve: (document) => document,
    }),
    chunks: t.relatedConnection('chunks', {
      cursor: 'id',
      defaultSize: 100,
      maxSize: 1000,
      query: { orderBy: { chunkIndex: 'asc' } },
    }),
  }),
});

builder.prismaObject('Chunk', {
  fields: (t) => ({
    documentId: t.exposeID('documentId'),
    chunkIndex: t.exposeInt('chunkIndex'),
    content: t.exposeString('content'),
    tokenCount: t.exposeInt('tokenCount'),
    metadata: t.expose('metadata', { type: 'JSON', description: '`page` (first page), `pages` spanned and `headings` in force.' }),
    document: t.relation('document'),
  }),
});

builder.prismaObjectFields('Workspace', (t) => ({
  documents: t.relatedConnection('documents', {
    cursor: 'id',
    defaultSize: 100,
    maxSize: 1000,
    description: 'Documents of the workspace, newest first.',
    query: { orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] },
  }),
}));

type ContextChunk = Awaited<ReturnType<typeof chunkContext>>['chunks'][number];
const ContextChunkRef = builder.objectRef<ContextChunk>('ContextChunk').implement({
  fields: (t) => ({
    documentId: t.exposeID('documentId'),
    chunkIndex: t.exposeInt('chunkIndex'),
    content: t.exposeString('content'),
    tokenCount: t.exposeInt('tokenCount'),
    metadata: t.expose('metadata', { type: 'JSON' }),
    isTarget: t.exposeBoolean('isTarget', { description: 'True for the chunk the context was asked for.' }),
  }),
});

const ChunkContextRef = builder.objectRef<{ documentId: string; chunkIndex: number; chunks: ContextChunk[] }>('ChunkContext').implement({
  fields: (t) => ({
    documentId: t.exposeID('documentId'),
    chunkIndex: t.exposeInt('chunkIndex'),
    chunks: t.field({ type: [ContextChunkRef], resolve: (context) => context.chunks }),
  }),
});

type GrepResult = Awaited<ReturnType<typeof grepDocument>>;
const GrepMatchRef = builder.objectRef<{ start: number; end: number }>('GrepMatch').implement({
  description: 'A match as UTF-16 offsets into the chunk content, end exclusive.',
  fields: (t) => ({ start: t.exposeInt('start'), end: t.exposeInt('end') }),
});
const GrepChunkRef = builder.objectRef<GrepResult['chunks'][number]>('GrepChunk').implement({
  fields: (t) => ({
    chunkIndex: t.exposeInt('chunkIndex'),
    content: t.exposeString('content'),
    highlighted: t.exposeString('highlighted', { description: 'The content with each match wrapped in <mark></mark>.' }),
    matches: t.field({ type: [GrepMatchRef], resolve: (chunk) => chunk.matches }),
    metadata: t.expose('metadata', { type: 'JSON' }),
  }),
});
const GrepResultRef = builder.objectRef<GrepResult>('GrepResult').implement({
  fields: (t) => ({
    documentId: t.exposeID('documentId'),
    pattern: t.exposeString('pattern'),
    caseSensitive: t.exposeBoolean('caseSensitive'),
    totalMatches: t.exposeInt('totalMatches', { description: 'Matches returned (not counted past a limit).' }),
    truncated: t.exposeBoolean('truncated', {
      description: 'True when matching stopped at a limit: 1,000 matches, 2,000,000 characters of chunks, or 5 s.',
    }),
    chunks: t.field({ type: [GrepChunkRef], resolve: (result) => result.chunks }),
  }),
});

type DocumentRow = Awaited<ReturnType<typeof findDocument>>;

const PreviewRef = builder.objectRef<{ document: DocumentRow; chunkCount: number }>('DocumentPreview');
PreviewRef.implement({
  fields: (t) => ({
    document: t.field({ type: DocumentRef, resolve: (preview) => preview.document }),
    content: t.string({
      nullable: true,
      description: 'The extracted text; null until the document is ready.',
      resolve: (preview) => preview.document.text,
    }),
    chunks: t.prismaField({
      type: ['Chunk'],
      resolve: (_query, preview, _args, context) => firstChunks(context, preview.document.id, preview.chunkCount),
    }),
  }),
});

const count = (max: number) => z.number().int('must be an integer').min(0, 'must be at least 0').max(max, `must be at most ${max}`);

builder.queryFields((t) => ({
  document: t.prismaField({
    type: 'Document',
    authScopes: { scope: 'kb:read' },
    args: { id: t.arg.id() },
    resolve: (query, _root, { id }, context) => findDocument(context, viewerOf(context), String(id), { query }),
  }),
  documents: t.prismaConnection({
    type: 'Document',
    cursor: 'id',
    defaultSize: 100,
    maxSize: 1000,
    description: 'Documents of one workspace, newest first.',
    authScopes: { scope: 'kb:read' },
    args: { workspaceId: t.arg.id() },
    resolve: (query, _root, { workspaceId }, context) => listDocuments(context, viewerOf(context), String(workspaceId), query),
  }),
  documentPreview: t.field({
    type: PreviewRef,
    authScopes: { scope: 'kb:read' },
    args: {
      id: t.arg.id(),
      workspaceId: t.arg.id(),
      chunks: t.arg.int({ required: false, defaultValue: 10, validate: count(1000) }),
    },
    // The document is read once, whole: its text is the preview's content.
    resolve: async (_root, { id, workspaceId, chunks }, context) => ({
      document: await findDocument(context, viewerOf(context), String(id), { workspaceId: String(workspaceId) }),
      chunkCount: chunks ?? 10,
    }),
  }),
  documentFile: t.field({
    type: DocumentFileRef,
    description: 'The file a document was made from, as it was uploaded (404 unless the document is in `workspaceId`).',
    authScopes: { scope: 'kb:read' },
    args: { id: t.arg.id(), workspaceId: t.arg.id() },
    resolve: (_root, { id, workspaceId }, context) =>
      findDocument(context, viewerOf(context), String(id), { workspaceId: String(workspaceId), query: { select: documentFileSelect } }),
  }),
  documentChunks: t.prismaConnection({
    type: 'Chunk',
    cursor: 'id',
    defaultSize: 100,
    maxSize: 1000,
    description: 'Chunks of a document in reading order.',
    authScopes: { scope: 'kb:read' },
    args: { id: t.arg.id(), workspaceId: t.arg.id() },
    resolve: (query, _root, { id, workspaceId }, context) =>
      listChunks(context, viewerOf(context), { documentId: String(id), workspaceId: String(workspaceId) }, query),
  }),
  chunkContext: t.field({
    type: ChunkContextRef,
    authScopes: { scope: 'kb:read' },
    args: {
      documentId: t.arg.id(),
      workspaceId: t.arg.id(),
      chunkIndex: t.arg.int({ validate: count(2 ** 31 - 1) }),
      before: t.arg.int({ required: false, defaultValue: 2, validate: count(100) }),
      after: t.arg.int({ required: false, defaultValue: 2, validate: count(100) }),
    },
    resolve: (_root, args, context) =>
      chunkContext(
        context,
        viewerOf(context),
        { documentId: String(args.documentId), workspaceId: String(args.workspaceId) },
        { chunkIndex: args.chunkIndex, before: args.before ?? 2, after: args.after ?? 2 },
      ),
  }),
  grepDocument: t.field({
    type: GrepResultRef,
    authScopes: { scope: 'kb:read' },
    args: {
      documentId: t.arg.id(),
      workspaceId: t.arg.id(),
      pattern: t.arg.string(),
      caseSensitive: t.arg.boolean({ required: false, defaultValue: false }),
    },
    resolve: (_root, args, context) =>
      grepDocument(
        context,
        viewerOf(context),
        { documentId: String(args.documentId), workspaceId: String(args.workspaceId) },
        compileGrepPattern(args.pattern, args.caseSensitive ?? false),
      ),
  }),
}));

/** The uploaded files; a value that is not a file part of a multipart request (a string, a number, an object) is a 400 on `field`. */
async function readUploads(values: readonly unknown[], field: string): Promise<UploadedFile[]> {
  const files = values.map((value) => {
    const file = value as Partial<File> | null;
    if (typeof file?.arrayBuffer !== 'function' || typeof file.name !== 'string') {
      throw badRequest(field, 'must be a file part of a GraphQL multipart request');
    }
    return file as File;
  });
  return Promise.all(files.map(async (file) => ({ filename: file.name, bytes: new Uint8Array(await file.arrayBuffer()) })));
}

const UpdateDocumentInput = builder.inputType('UpdateDocumentInput', {
  description: 'What to change; a field left out stays as it is.',
  fields: (t) => ({
    filename: t.string({ required: false, description: 'The new file name; null or left out: unchanged.', validate: filenameInput().nullish() }),
    metadata: t.field({ type: 'JSON', required: false, validate: metadataInput() }),
  }),
});

builder.mutationFields((t) => ({
  uploadDocuments: t.prismaField({
    type: ['Document'],
    description: 'Stores the files and queues them for processing. Same content again in a workspace returns the existing document.',
    authScopes: { scope: 'kb:write' },
    args: { workspaceId: t.arg.id(), files: t.arg({ type: ['File'] }), metadata: t.arg({ type: 'JSON', required: false }) },
    resolve: async (_query, _root, args, context) =>
      uploadDocuments(context, viewerOf(context), String(args.workspaceId), await readUploads(args.files, 'files'), args.metadata),
  }),
  uploadDocument: t.prismaField({
    type: 'Document',
    description: 'One file; see uploadDocuments.',
    authScopes: { scope: 'kb:write' },
    args: { workspaceId: t.arg.id(), file: t.arg({ type: 'File' }), metadata: t.arg({ type: 'JSON', required: false }) },
    resolve: async (_query, _root, args, context) => {
      const [document] = await uploadDocuments(context, viewerOf(context), String(args.workspaceId), await readUploads([args.file], 'file'), args.metadata);
      return document!;
    },
  }),
  retryDocument: t.prismaField({
    type: 'Document',
    errors: {},
    description:
      'Processes a failed document again from its uploaded bytes: it is queued from the start, its error cleared. A document that has not failed is a `document_not_failed` error (409); of retries at once, one queues it.',
    authScopes: { scope: 'kb:write' },
    args: { id: t.arg.id(), workspaceId: t.arg.id() },
    resolve: (_query, _root, { id, workspaceId }, context) =>
      retryDocument(context, viewerOf(context), { documentId: String(id), workspaceId: String(workspaceId) }),
  }),
  updateDocument: t.prismaField({
    type: 'Document',
    errors: {},
    description:
      'Renames the document or replaces its metadata. A ready document renamed is embedded again with its new name and stays searchable meanwhile; one queued, processing or still being indexed after a rename is a `document_busy` error (409).',
    authScopes: { scope: 'kb:write' },
    args: { id: t.arg.id(), input: t.arg({ type: UpdateDocumentInput }) },
    resolve: (_query, _root, { id, input }, context) => updateDocument(context, viewerOf(context), String(id), input),
  }),
  deleteDocument: t.field({
    type: DeletedRef,
    errors: {},
    description: 'Deletes the document with its chunks and their index entries.',
    authScopes: { scope: 'kb:write' },
    args: { id: t.arg.id() },
    resolve: (_root, { id }, context) => deleteDocument(context, viewerOf(context), String(id)),
  }),
}));
