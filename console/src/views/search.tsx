import { useEffect, useState } from 'preact/hooks';
import { call, KbApiError, pageOf, type SearchResult } from '../api.js';
import { Empty, ErrorNotice, href, useAccount, useWorkspaces } from '../ui.js';
import { citationHref } from './document.js';

type Mode = 'hybrid' | 'vector' | 'keyword';

/** A playground for POST /v1/kb/query: the request as sent, and each result's score, page and text. */
export function SearchScreen({ initialWorkspace }: { initialWorkspace: string | null }) {
  const { api } = useAccount();
  const workspaces = useWorkspaces();
  const [workspaceId, setWorkspaceId] = useState(initialWorkspace ?? '');
  const [query, setQuery] = useState('');
  const [mode, setMode] = useState<Mode>('hybrid');
  const [topK, setTopK] = useState(5);
  const [filter, setFilter] = useState('');
  const [results, setResults] = useState<{ items: SearchResult[]; milliseconds: number; request: { workspace_id: string } } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (!workspaceId && workspaces.value?.[0]) setWorkspaceId(workspaces.value[0].id);
  }, [workspaces.value]);

  const search = async (event: Event) => {
    event.preventDefault();
    setError(null);
    let parsedFilter: Record<string, unknown> | undefined;
    if (filter.trim()) {
      try {
        parsedFilter = JSON.parse(filter) as Record<string, unknown>;
      } catch (failure) {
        setError(new KbApiError(400, 'bad_request', `the filter is not JSON: ${(failure as Error).message}`, null));
        return;
      }
    }
    const body = { query, workspace_id: workspaceId, top_k: topK, mode, ...(parsedFilter && { filter: parsedFilter as never }) };
    setBusy(true);
    const started = performance.now();
    try {
      const answer = await call(api.POST('/v1/kb/query', { body }));
      setResults({ items: answer.results, milliseconds: performance.now() - started, request: body });
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };

  const names = new Map((workspaces.value ?? []).map((workspace) => [workspace.id, workspace.name]));
  return (
    <section>
      <h1 tabIndex={-1}>Search</h1>
      <p class="lead">
        Try <code>POST /v1/kb/query</code>: the chunks nearest your query, with their scores. No answer is written and no credits are used.
      </p>
      <ErrorNotice error={workspaces.error} />
      {workspaces.value?.length === 0 && (
        <Empty>
          There is no workspace to search yet. <a href={href('workspaces')}>Create one and upload documents</a>.
        </Empty>
      )}
      <form class="stack" onSubmit={search}>
        <div class="row">
          <label>
            Workspace
            <select value={workspaceId} onChange={(event) => setWorkspaceId(event.currentTarget.value)} required>
              {(workspaces.value ?? []).map((workspace) => (
                <option key={workspace.id} value={workspace.id}>
                  {workspace.name}
                </option>
              ))}
            </select>
          </label>
          <label>
            Mode
            <select value={mode} onChange={(event) => setMode(event.currentTarget.value as Mode)}>
              <option value="hybrid">hybrid (vector and keyword)</option>
              <option value="vector">vector</option>
              <option value="keyword">keyword</option>
            </select>
          </label>
          <label>
            Results
            <input type="number" min={1} max={100} value={topK} onInput={(event) => setTopK(Number(event.currentTarget.value))} />
          </label>
        </div>
        <label>
          Query
          <input type="search" value={query} maxLength={10_000} placeholder="What are you looking for?" onInput={(event) => setQuery(event.currentTarget.value)} required />
        </label>
        <details>
          <summary>Metadata filter</summary>
          <label>
            Filter (JSON)
            <textarea rows={2} value={filter} placeholder={'{"author": "Ada"} or {"year": {"in": [2023, 2024]}}'} onInput={(event) => setFilter(event.currentTarget.value)} />
          </label>
        </details>
        <div>
          <button type="submit" class="primary" disabled={busy || !workspaceId || query.trim() === ''}>
            {busy ? 'Searching…' : 'Search'}
          </button>
        </div>
      </form>
      <ErrorNotice error={error} onDismiss={() => setError(null)} />
      {results && (
        <>
          <p role="status" class="muted">
            {results.items.length} result{results.items.length === 1 ? '' : 's'} from {names.get(results.request.workspace_id) ?? 'the workspace'} in {Math.round(results.milliseconds)} ms.
          </p>
          <details class="request">
            <summary>Request body</summary>
            <pre>{JSON.stringify(results.request, null, 2)}</pre>
          </details>
          <ol class="results" aria-label="Search results">
            {results.items.map((result) => {
              const page = pageOf(result.metadata);
              return (
                <li key={`${result.document_id}:${result.chunk_index}`} class="result" data-testid="search-result">
                  <div class="chunk-head">
                    <span class="score" title="Score">
                      {result.score.toFixed(3)}
                    </span>
                    <a href={citationHref(results.request.workspace_id, result.document_id, { chunk: result.chunk_index, start: null, end: null, page })}>{result.filename}</a>
                    {page !== null && <span class="page">page {page}</span>}
                    <span class="muted">chunk {result.chunk_index}</span>
                  </div>
                  <p class="chunk-text">{result.content}</p>
                </li>
              );
            })}
          </ol>
        </>
      )}
    </section>
  );
}
