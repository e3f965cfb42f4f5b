import { useEffect, useRef, useState } from 'preact/hooks';
import { call, formatBytes, formatDate, isSettled, listAll, stageOf, type KbDocument, type Workspace } from '../api.js';
import { useUploads } from '../uploads.js';
import { Empty, ErrorNotice, href, navigate, ProgressBar, useAccount, useLoad } from '../ui.js';
import { DeleteDialog, RenameDialog } from './workspaces.js';

const pageSize = 100;

export function WorkspaceScreen({ workspaceId }: { workspaceId: string }) {
  const { api } = useAccount();
  const workspace = useLoad<Workspace>((signal) => call(api.GET('/v1/kb/workspaces/{id}', { params: { path: { id: workspaceId } }, signal })), [workspaceId]);
  const [shown, setShown] = useState(pageSize);
  const [documents, setDocuments] = useState<KbDocument[] | null>(null);
  const [hasMore, setHasMore] = useState(false);
  const [listError, setListError] = useState<unknown>(null);
  const queue = useUploads();
  const uploads = queue.uploads.filter((upload) => upload.workspaceId === workspaceId);
  const [actionError, setActionError] = useState<unknown>(null);
  const [renaming, setRenaming] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const [dragging, setDragging] = useState(false);
  const fileInput = useRef<HTMLInputElement>(null);
  const [tick, setTick] = useState(0);

  const refreshList = async (signal?: AbortSignal) => {
    try {
      const listed = await listAll<KbDocument>(
        (cursor) => api.GET('/v1/kb/workspaces/{id}/documents', { params: { path: { id: workspaceId }, query: { limit: pageSize, ...(cursor && { cursor }) } }, ...(signal && { signal }) }),
        shown + 1,
      );
      if (signal?.aborted) return;
      setHasMore(listed.length > shown);
      setDocuments(listed.slice(0, shown));
      setListError(null);
    } catch (failure) {
      if (!signal?.aborted) setListError(failure);
    }
  };

  useEffect(() => {
    const controller = new AbortController();
    void refreshList(controller.signal);
    return () => controller.abort();
  }, [workspaceId, shown, tick]);

  // While a document is on its way, its status is read again every second.
  const working = (documents ?? []).some((document) => !isSettled(document)) || uploads.some((upload) => upload.state === 'uploading');
  useEffect(() => {
    if (!working) return;
    const timer = setTimeout(() => setTick((value) => value + 1), 1000);
    return () => clearTimeout(timer);
  }, [working, documents]);

  const addFiles = (files: FileList | File[]) => queue.add(workspaceId, files);

  // A finished upload's documents join the list at once, before the next reading of it.
  const sentCount = uploads.filter((upload) => upload.state === 'sent').length;
  useEffect(() => {
    if (sentCount > 0) setTick((value) => value + 1);
  }, [sentCount]);

  const retry = async (document: KbDocument) => {
    setActionError(null);
    try {
      const queued = await call(api.POST('/v1/kb/documents/{id}/retry', { params: { path: { id: document.id }, query: { workspace_id: workspaceId } } }));
      // The row shows the queued document at once; the next readings follow it from there.
      setDocuments((current) => current && current.map((item) => (item.id === queued.id ? queued : item)));
      setTick((value) => value + 1);
    } catch (failure) {
      setActionError(failure);
    }
  };

  const remove = async (document: KbDocument) => {
    if (!confirm(`Delete “${document.filename}” with its ${document.chunk_count} chunks? Search and chat will no longer find it.`)) return;
    setActionError(null);
    try {
      await call(api.DELETE('/v1/kb/documents/{id}', { params: { path: { id: document.id } } }));
      setTick((value) => value + 1);
    } catch (failure) {
      setActionError(failure);
    }
  };

  const name = workspace.value?.name ?? 'Workspace';
  return (
    <section>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href('workspaces')}>Workspaces</a> <span aria-hidden="true">/</span> <span>{name}</span>
      </nav>
      <div class="heading-row">
        <h1 tabIndex={-1}>{name}</h1>
        <div class="actions">
          <a class="button" href={`${href('search')}?workspace=${encodeURIComponent(workspaceId)}`}>
            Search
          </a>
          <a class="button" href={`${href('chat')}?workspace=${encodeURIComponent(workspaceId)}`}>
            Ask
          </a>
          <button type="button" onClick={() => setRenaming(true)} disabled={!workspace.value}>
            Rename
          </button>
          <button type="button" class="danger" onClick={() => setDeleting(true)} disabled={!workspace.value}>
            Delete
          </button>
        </div>
      </div>
      <ErrorNotice error={workspace.error} />

      <div
        class={`dropzone${dragging ? ' dragging' : ''}`}
        onDragOver={(event) => (event.preventDefault(), setDragging(true))}
        onDragLeave={() => setDragging(false)}
        onDrop={(event) => {
          event.preventDefault();
          setDragging(false);
          if (event.dataTransfer?.files) addFiles(event.dataTransfer.files);
        }}
      >
        <p>
          <strong>Drop files here</strong> to upload them, several at once: PDF, DOCX, HTML, Markdown, text, CSV or JSON.
        </p>
        <button type="button" class="primary" onClick={() => fileInput.current?.click()}>
          Choose files…
        </button>
        <input
          ref={fileInput}
          type="file"
          multiple
          hidden
          data-testid="file-input"
          aria-label="Files to upload"
          onChange={(event) => {
            if (event.currentTarget.files) addFiles(event.currentTarget.files);
            event.currentTarget.value = '';
          }}
        />
      </div>

      {uploads.length > 0 && (
        <ul class="uploads" aria-label="Uploads">
          {uploads.map((upload) => (
            <li key={upload.id} class={`upload ${upload.state}`}>
              <span class="filename">{upload.file.name}</span>
              <span class="muted">{formatBytes(upload.file.size)}</span>
              {upload.state === 'refused' ? (
                <div class="grow">
                  <ErrorNotice error={upload.error} onDismiss={() => queue.dismiss(upload.id)} />
                </div>
              ) : (
                <>
                  <ProgressBar value={upload.total > 0 ? upload.sent / upload.total : 0} label={`Uploading ${upload.file.name}`} />
                  <span class="muted">{upload.state === 'waiting' ? 'waiting' : upload.state === 'sent' ? 'uploaded' : `${Math.round((upload.sent / Math.max(upload.total, 1)) * 100)}%`}</span>
                </>
              )}
            </li>
          ))}
        </ul>
      )}

      <ErrorNotice error={actionError} onDismiss={() => setActionError(null)} />
      <ErrorNotice error={listError} />
      <h2>Documents</h2>
      {documents && documents.length === 0 && <Empty>No documents yet. Drop files above.</Empty>}
      {documents && documents.length > 0 && (
        <div class="table-wrap">
          <table class="documents">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col" class="numeric">Pages</th>
                <th scope="col" class="numeric">Chunks</th>
                <th scope="col" class="numeric">Size</th>
                <th scope="col">Added</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {documents.map((document) => (
                <DocumentRow key={document.id} document={document} workspaceId={workspaceId} onRetry={() => retry(document)} onDelete={() => remove(document)} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      {hasMore && (
        <button type="button" onClick={() => setShown((value) => value + pageSize)}>
          Show more documents
        </button>
      )}
      {renaming && workspace.value && (
        <RenameDialog
          workspace={workspace.value}
          onDone={(renamed) => {
            setRenaming(false);
            if (renamed) workspace.set(renamed);
          }}
        />
      )}
      {deleting && workspace.value && (
        <DeleteDialog
          workspace={workspace.value}
          onDone={(deleted) => {
            setDeleting(false);
            if (deleted) navigate(href('workspaces'));
          }}
        />
      )}
    </section>
  );
}

function DocumentRow({ document, workspaceId, onRetry, onDelete }: { document: KbDocument; workspaceId: string; onRetry: () => void; onDelete: () => void }) {
  const { stage, progress } = stageOf(document);
  const labels: Record<string, string> = { queued: 'Queued', parsing: 'Reading the file', ocr: 'Reading scanned pages (OCR)', embedding: 'Embedding', ready: 'Ready', failed: 'Failed' };
  return (
    <tr data-status={document.status} data-testid="document-row">
      <th scope="row">
        <a href={href('workspaces', workspaceId, 'documents', document.id)}>{document.filename}</a>
      </th>
      <td class="status">
        <span class={`badge ${document.status}`}>{labels[stage] ?? stage}</span>
        {document.status === 'processing' && (
          <>
            <ProgressBar value={progress} label={`Processing ${document.filename}`} />
            {stage === 'ocr' && (
              <span class="muted">
                page {document.ocr_pages_done + 1} of {document.ocr_pages_total}
              </span>
            )}
            {stage === 'embedding' && (
              <span class="muted">
                {document.embedded_chunks} of {document.chunk_count} chunks
              </span>
            )}
          </>
        )}
        {document.status === 'failed' && (
          <div class="failure">
            <span role="status">{document.error ?? 'Processing failed.'}</span>
            <button type="button" onClick={onRetry}>
              Retry
            </button>
          </div>
        )}
      </td>
      <td class="numeric">{document.page_count ?? '–'}</td>
      <td class="numeric">{document.chunk_count}</td>
      <td class="numeric">{formatBytes(document.size_bytes)}</td>
      <td>{formatDate(document.created_at)}</td>
      <td>
        <button type="button" class="ghost danger" onClick={onDelete} aria-label={`Delete ${document.filename}`}>
          Delete
        </button>
      </td>
    </tr>
  );
}
