import { builder } from '../../graphql/builder.js';
import { DeletedRef } from '../../graphql/shared-types.js';
import { viewerOf } from '../../graphql/viewer.js';
import { nameInput } from '../../input-limits.js';
import {
  createWorkspace,
  deleteWorkspace,
  findWorkspace,
  listWorkspaces,
  renameWorkspace,
  workspaceScan,
  workspaceStatsMany,
} from './service.js';

type Stats = Awaited<ReturnType<typeof workspaceStatsMany>>[number];
type Scan = Awaited<ReturnType<typeof workspaceScan>>;

const DocumentsByStatus = builder.objectRef<Stats['documentsByStatus']>('DocumentsByStatus').implement({
  fields: (t) => ({
    queued: t.exposeInt('queued'),
    processing: t.exposeInt('processing'),
    ready: t.exposeInt('ready'),
    failed: t.exposeInt('failed'),
  }),
});

const OcrProgress = builder.objectRef<Stats['ocr']>('OcrProgress').implement({
  description: 'Documents whose pages OCR is reading now (stage `ocr`), and their pages gone through of their pages in all.',
  fields: (t) => ({
    documents: t.exposeInt('documents'),
    pagesDone: t.exposeInt('pagesDone'),
    pagesTotal: t.exposeInt('pagesTotal'),
  }),
});

const WorkspaceStats = builder.objectRef<Stats>('WorkspaceStats').implement({
  fields: (t) => ({
    workspaceId: t.exposeID('workspaceId'),
    documentCount: t.exposeInt('documentCount'),
    chunkCount: t.exposeInt('chunkCount'),
    embeddedChunkCount: t.exposeInt('embeddedChunkCount', { description: 'Chunks embedded and indexed so far; equal to chunkCount when all are.' }),
    totalSizeBytes: t.exposeInt('totalSizeBytes'),
    processingStatus: t.exposeString('processingStatus', { description: '`idle`, `processing` or `failed`.' }),
    documentsByStatus: t.field({ type: DocumentsByStatus, resolve: (stats) => stats.documentsByStatus }),
    ocr: t.field({ type: OcrProgress, resolve: (stats) => stats.ocr }),
  }),
});

const ScannedDocument = builder.objectRef<Scan['documents'][number]>('ScannedDocument').implement({
  fields: (t) => ({
    documentId: t.exposeID('documentId'),
    filename: t.exposeString('filename'),
    status: t.exposeString('status'),
    chunkCount: t.exposeInt('chunkCount'),
    embeddedChunks: t.exposeInt('embeddedChunks'),
    indexedChunks: t.exposeInt('indexedChunks', { nullable: true, description: "The index's own count; null when it did not answer." }),
  }),
});

const ScanEmbedding = builder.objectRef<Scan['embedding']>('ScanEmbedding').implement({
  fields: (t) => ({
    model: t.exposeString('model', { description: 'The configured embedding model.' }),
    dimensions: t.exposeInt('dimensions'),
    index: t.exposeString('index', { description: '`pgvector` or `elasticsearch`.' }),
    indexModel: t.exposeString('indexModel', { description: 'The model the index was built with.' }),
    indexDimensions: t.exposeInt('indexDimensions'),
    modelMismatch: t.exposeBoolean('modelMismatch', { description: 'True until `kb reindex` when the two models differ.' }),
  }),
});

const ScanTotals = builder.objectRef<Scan['totals']>('ScanTotals').implement({
  fields: (t) => ({
    documentCount: t.exposeInt('documentCount'),
    chunkCount: t.exposeInt('chunkCount'),
    embeddedChunks: t.exposeInt('embeddedChunks'),
    indexedChunks: t.exposeInt('indexedChunks', { nullable: true }),
  }),
});

const WorkspaceScan = builder.objectRef<Scan>('WorkspaceScan').implement({
  fields: (t) => ({
    workspaceId: t.exposeID('workspaceId'),
    embedding: t.field({ type: ScanEmbedding, resolve: (scan) => scan.embedding }),
    documents: t.field({ type: [ScannedDocument], resolve: (scan) => scan.documents }),
    totals: t.field({ type: ScanTotals, resolve: (scan) => scan.totals }),
  }),
});

builder.prismaObject('Workspace', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    stats: t.loadable({
      type: WorkspaceStats,
      description: 'Document count, total size and processing status.',
      // Batched: a page of workspaces with their stats costs one query, not one per workspace.
      load: (workspaceIds: string[], context) => workspaceStatsMany(context, workspaceIds),
      resolve: (workspace) => workspace.id,
    }),
    scan: t.field({
      type: WorkspaceScan,
      description: 'Per-document chunk counts and embedding status.',
      resolve: (workspace, _args, context) => workspaceScan(context, workspace.id),
    }),
  }),
});

const WorkspaceInput = builder.inputType('WorkspaceInput', {
  fields: (t) => ({ name: t.string({ validate: nameInput() }) }),
});

builder.queryField('workspaces', (t) =>
  t.prismaConnection({
    type: 'Workspace',
    cursor: 'id',
    defaultSize: 100,
    maxSize: 1000,
    description: "The viewer's workspaces, newest first; for a key restricted to workspaces, only those.",
    authScopes: { scope: 'kb:read' },
    resolve: (query, _root, _args, context) => listWorkspaces(context, viewerOf(context), query),
  }),
);

builder.queryField('workspace', (t) =>
  t.prismaField({
    type: 'Workspace',
    authScopes: { scope: 'kb:read' },
    args: { id: t.arg.id() },
    resolve: (query, _root, { id }, context) => findWorkspace(context, viewerOf(context), String(id), query),
  }),
);

builder.mutationField('createWorkspace', (t) =>
  t.prismaField({
    errors: {},
    type: 'Workspace',
    description: 'Names are unique per user, ignoring case: a duplicate is a `conflict` error.',
    authScopes: { scope: 'kb:write' },
    // A key restricted to workspaces cannot make another: 403 from the operation gate (policy.ts).
    extensions: { unrestrictedOnly: 'create a workspace' },
    args: { input: t.arg({ type: WorkspaceInput }) },
    resolve: (query, _root, { input }, context) => createWorkspace(context, viewerOf(context), input.name.trim(), query),
  }),
);

builder.mutationField('updateWorkspace', (t) =>
  t.prismaField({
    errors: {},
    type: 'Workspace',
    authScopes: { scope: 'kb:write' },
    args: { id: t.arg.id(), input: t.arg({ type: WorkspaceInput }) },
    resolve: (query, _root, { id, input }, context) => renameWorkspace(context, viewerOf(context), String(id), input.name.trim(), query),
  }),
);

builder.mutationField('deleteWorkspace', (t) =>
  t.field({
    errors: {},
    type: DeletedRef,
    description: 'Deletes the workspace with all its documents. Irreversible.',
    authScopes: { scope: 'kb:write' },
    args: { id: t.arg.id() },
    resolve: (_root, { id }, context) => deleteWorkspace(context, viewerOf(context), String(id)),
  }),
);
