import { z } from 'zod';
import { badRequest } from '../../errors.js';
import { builder } from '../../graphql/builder.js';
import { DeletedRef } from '../../graphql/shared-types.js';
import type { Context } from '../../graphql/context.js';
import { viewerOf } from '../../graphql/viewer.js';
import { findWorkspace } from '../workspaces/service.js';
import {
  chunkContext,
  compileGrepPattern,
  deleteDocument,
  findDocument,
  firstChunks,
  grepDocument,
  listChunks,
  listDocuments,
  uploadDocuments,
  type UploadedFile,
} from './service.js';

builder.scalarType('File', {
  description: 'A file sent with the GraphQL multipart request specification.',
  serialize: () => {
    throw new Error('File is an input type');
  },
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
    error: t.exposeString('error', { nullable: true, description: 'Why processing failed.' }),
    pageCount: t.exposeInt('pageCount', { nullable: true }),
    chunkCount: t.exposeInt('chunkCount'),
    embeddedChunks: t.exposeInt('embeddedChunks', {
      description: 'Chunks embedded and indexed so far: progress while processing; equal to chunkCount once ready.',
    }),
    metadata: t.expose('metadata', { type: 'JSON' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    workspace: t.relation('workspace'),
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

type ContextChunk = Awaited<ReturnType<typeof chunkContext>>[number];
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
      resolve: (_query, preview, _args, context) => firstChunks(context.prisma, preview.document.id, preview.chunkCount),
    }),
  }),
});

const count = (max: number) => z.number().int('must be an integer').min(0, 'must be at least 0').max(max, `must be at most ${max}`);

/** The id of the document once it is known to be the viewer's and in `workspaceId`; else 404. */
async function documentIdIn(context: Context, id: string | number, workspaceId: string | number) {
  const document = await findDocument(context.prisma, viewerOf(context).userId, String(id), {
    workspaceId: String(workspaceId),
    query: { select: { id: true } },
  });
  return document.id;
}

builder.queryFields((t) => ({
  document: t.prismaField({
    type: 'Document',
    authScopes: { scope: 'kb:read' },
    args: { id: t.arg.id() },
    resolve: (query, _root, { id }, context) => findDocument(context.prisma, viewerOf(context).userId, String(id), { query }),
  }),
  documents: t.prismaConnection({
    type: 'Document',
    cursor: 'id',
    defaultSize: 100,
    maxSize: 1000,
    description: 'Documents of one workspace, newest first.',
    authScopes: { scope: 'kb:read' },
    args: { workspaceId: t.arg.id() },
    resolve: async (query, _root, { workspaceId }, context) => {
      const workspace = await findWorkspace(context.prisma, viewerOf(context).userId, String(workspaceId), { select: { id: true } });
      return listDocuments(context.prisma, workspace.id, query);
    },
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
      document: await findDocument(context.prisma, viewerOf(context).userId, String(id), { workspaceId: String(workspaceId) }),
      chunkCount: chunks ?? 10,
    }),
  }),
  documentChunks: t.prismaConnection({
    type: 'Chunk',
    cursor: 'id',
    defaultSize: 100,
    maxSize: 1000,
    description: 'Chunks of a document in reading order.',
    authScopes: { scope: 'kb:read' },
    args: { id: t.arg.id(), workspaceId: t.arg.id() },
    resolve: async (query, _root, { id, workspaceId }, context) => listChunks(context.prisma, await documentIdIn(context, id, workspaceId), query),
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
    resolve: async (_root, args, context) => {
      const documentId = await documentIdIn(context, args.documentId, args.workspaceId);
      const chunks = await chunkContext(context.prisma, documentId, args.chunkIndex, args.before ?? 2, args.after ?? 2);
      return { documentId, chunkIndex: args.chunkIndex, chunks };
    },
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
    resolve: async (_root, args, context) => {
      const pattern = compileGrepPattern(args.pattern, args.caseSensitive ?? false);
      return grepDocument(context.prisma, await documentIdIn(context, args.documentId, args.workspaceId), pattern);
    },
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

builder.mutationFields((t) => ({
  uploadDocuments: t.prismaField({
    type: ['Document'],
    description: 'Stores the files and queues them for processing. Same content again in a workspace returns the existing document.',
    authScopes: { scope: 'kb:write' },
    args: { workspaceId: t.arg.id(), files: t.arg({ type: ['File'] }), metadata: t.arg({ type: 'JSON', required: false }) },
    resolve: async (_query, _root, args, context) => {
      const documents = await uploadDocuments(
        context.prisma,
        viewerOf(context).userId,
        String(args.workspaceId),
        await readUploads(args.files, 'files'),
        args.metadata,
        context.config.uploads,
        context.config.ingestion,
      );
      context.ingestion.notify();
      return documents;
    },
  }),
  uploadDocument: t.prismaField({
    type: 'Document',
    description: 'One file; see uploadDocuments.',
    authScopes: { scope: 'kb:write' },
    args: { workspaceId: t.arg.id(), file: t.arg({ type: 'File' }), metadata: t.arg({ type: 'JSON', required: false }) },
    resolve: async (_query, _root, args, context) => {
      const [document] = await uploadDocuments(
        context.prisma,
        viewerOf(context).userId,
        String(args.workspaceId),
        await readUploads([args.file], 'file'),
        args.metadata,
        context.config.uploads,
        context.config.ingestion,
      );
      context.ingestion.notify();
      return document!;
    },
  }),
  deleteDocument: t.field({
    type: DeletedRef,
    errors: {},
    description: 'Deletes the document with its chunks and their index entries.',
    authScopes: { scope: 'kb:write' },
    args: { id: t.arg.id() },
    resolve: async (_root, { id }, context) => {
      const deleted = await deleteDocument(context.prisma, viewerOf(context).userId, String(id));
      await context.ingestion.cancelDeleted();
      return deleted;
    },
  }),
}));
