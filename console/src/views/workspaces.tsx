import { useState } from 'preact/hooks';
import { call, formatBytes, formatDate, type Workspace, type WorkspaceStats } from '../api.js';
import { Dialog, Empty, ErrorNotice, href, navigate, useAccount, useLoad, useWorkspaces } from '../ui.js';

export function WorkspacesScreen() {
  const { api } = useAccount();
  const workspaces = useWorkspaces();
  const [name, setName] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [renaming, setRenaming] = useState<Workspace | null>(null);
  const [deleting, setDeleting] = useState<Workspace | null>(null);

  const create = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const created = await call(api.POST('/v1/kb/workspaces', { body: { name: name.trim() }, headers: { 'Idempotency-Key': crypto.randomUUID() } }));
      setName('');
      navigate(href('workspaces', created.id));
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section>
      <h1 tabIndex={-1}>Workspaces</h1>
      <p class="lead">A workspace holds documents. Search and chat look into the workspaces you choose.</p>
      <form class="inline" onSubmit={create}>
        <label for="new-workspace">New workspace</label>
        <input id="new-workspace" value={name} maxLength={200} placeholder="e.g. Research papers" onInput={(event) => setName(event.currentTarget.value)} required />
        <button type="submit" class="primary" disabled={busy || name.trim() === ''}>
          Create workspace
        </button>
      </form>
      <ErrorNotice error={error} onDismiss={() => setError(null)} />
      <ErrorNotice error={workspaces.error} />
      {workspaces.value && workspaces.value.length === 0 && <Empty>No workspaces yet. Create one above, then upload documents into it.</Empty>}
      {workspaces.value && workspaces.value.length > 0 && (
        <ul class="cards" aria-label="Workspaces">
          {workspaces.value.map((workspace) => (
            <li key={workspace.id} class="card">
              <a class="title" href={href('workspaces', workspace.id)}>
                {workspace.name}
              </a>
              <span class="muted">Created {formatDate(workspace.created_at)}</span>
              <div class="actions">
                <button type="button" onClick={() => setRenaming(workspace)} aria-label={`Rename ${workspace.name}`}>
                  Rename
                </button>
                <button type="button" class="danger" onClick={() => setDeleting(workspace)} aria-label={`Delete ${workspace.name}`}>
                  Delete
                </button>
              </div>
            </li>
          ))}
        </ul>
      )}
      {renaming && <RenameDialog workspace={renaming} onDone={() => (setRenaming(null), workspaces.reload())} />}
      {deleting && <DeleteDialog workspace={deleting} onDone={() => (setDeleting(null), workspaces.reload())} />}
    </section>
  );
}

export function RenameDialog({ workspace, onDone }: { workspace: Workspace; onDone: (renamed?: Workspace) => void }) {
  const { api } = useAccount();
  const [name, setName] = useState(workspace.name);
  const [error, setError] = useState<unknown>(null);
  const save = async (event: Event) => {
    event.preventDefault();
    try {
      onDone(await call(api.PATCH('/v1/kb/workspaces/{id}', { params: { path: { id: workspace.id } }, body: { name: name.trim() } })));
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <Dialog title={`Rename “${workspace.name}”`} onClose={() => onDone()}>
      <form onSubmit={save}>
        <label for="rename-workspace">Name</label>
        <input id="rename-workspace" value={name} maxLength={200} onInput={(event) => setName(event.currentTarget.value)} required autoFocus />
        <ErrorNotice error={error} />
        <div class="actions">
          <button type="button" onClick={() => onDone()}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={name.trim() === '' || name.trim() === workspace.name}>
            Rename
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** Deleting a workspace says what goes with it, counted, before anything is deleted. */
export function DeleteDialog({ workspace, onDone }: { workspace: Workspace; onDone: (deleted: boolean) => void }) {
  const { api } = useAccount();
  const stats = useLoad<WorkspaceStats>((signal) => call(api.GET('/v1/kb/workspaces/{id}/stats', { params: { path: { id: workspace.id } }, signal })), [workspace.id]);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const remove = async () => {
    setBusy(true);
    try {
      await call(api.DELETE('/v1/kb/workspaces/{id}', { params: { path: { id: workspace.id } } }));
      onDone(true);
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };
  const counts = stats.value;
  return (
    <Dialog title={`Delete “${workspace.name}”?`} onClose={() => onDone(false)}>
      {counts ? (
        <p data-testid="delete-consequence">
          This deletes the workspace <strong>{workspace.name}</strong> with its {counts.document_count.toLocaleString()} document
          {counts.document_count === 1 ? '' : 's'} ({formatBytes(counts.total_size_bytes)}) and their {counts.chunk_count.toLocaleString()} indexed chunk
          {counts.chunk_count === 1 ? '' : 's'}. Search and chat will no longer find them, and keys restricted to it lose access to it. This cannot be undone.
        </p>
      ) : (
        <p>This deletes the workspace {workspace.name} with all its documents and their chunks. This cannot be undone.</p>
      )}
      <ErrorNotice error={error ?? stats.error} />
      <div class="actions">
        <button type="button" onClick={() => onDone(false)} autoFocus>
          Keep it
        </button>
        <button type="button" class="danger" onClick={remove} disabled={busy}>
          Delete workspace
        </button>
      </div>
    </Dialog>
  );
}
