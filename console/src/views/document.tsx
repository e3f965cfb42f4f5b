import type { PDFDocumentProxy } from 'pdfjs-dist/legacy/build/pdf.mjs';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, formatBytes, nextCursor, pageOf, stageOf, type Chunk, type ContextResult, type GrepResult, type KbDocument } from '../api.js';
import { Empty, ErrorNotice, Highlighted, href, ProgressBar, useAccount, useLoad } from '../ui.js';

type Tab = 'passage' | 'chunks' | 'grep';

/** Where a citation points: a chunk, the quote's offsets in it, and its page. */
export type Citation = { chunk: number; start: number | null; end: number | null; page: number | null };

export const citationHref = (workspaceId: string, documentId: string, citation: Citation) => {
  const query = new URLSearchParams({ chunk: String(citation.chunk) });
  if (citation.start !== null && citation.end !== null) query.set('start', String(citation.start)), query.set('end', String(citation.end));
  if (citation.page !== null) query.set('page', String(citation.page));
  return `${href('workspaces', workspaceId, 'documents', documentId)}?${query}`;
};

const integer = (value: string | null) => (value !== null && /^\d+$/.test(value) ? Number(value) : null);

export function DocumentScreen({ workspaceId, documentId, query }: { workspaceId: string; documentId: string; query: URLSearchParams }) {
  const { api } = useAccount();
  const chunk = integer(query.get('chunk'));
  const citation: Citation | null = chunk === null ? null : { chunk, start: integer(query.get('start')), end: integer(query.get('end')), page: integer(query.get('page')) };
  const [tab, setTab] = useState<Tab>(citation ? 'passage' : 'chunks');
  useEffect(() => setTab(citation ? 'passage' : 'chunks'), [documentId, query.toString()]);

  const document = useLoad<KbDocument>(
    (signal) => call(api.GET('/v1/kb/documents/{id}', { params: { path: { id: documentId } }, signal })),
    [documentId, workspaceId],
  );
  // A link may name another workspace than the document's (an old link, a hand-edited one): the document's own wins.
  useEffect(() => {
    const actual = document.value?.workspace_id;
    if (actual && actual !== workspaceId) location.replace(`${href('workspaces', actual, 'documents', documentId)}${query.size > 0 ? `?${query}` : ''}`);
  }, [document.value?.workspace_id]);
  const tabs: { id: Tab; label: string }[] = [...(citation ? [{ id: 'passage' as const, label: 'Cited passage' }] : []), { id: 'chunks', label: 'Chunks' }, { id: 'grep', label: 'Find in document' }];
  const current = document.value;
  const isPdf = current?.content_type === 'application/pdf';

  return (
    <section>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href('workspaces')}>Workspaces</a> <span aria-hidden="true">/</span> <a href={href('workspaces', workspaceId)}>Workspace</a>{' '}
        <span aria-hidden="true">/</span> <span>{current?.filename ?? 'Document'}</span>
      </nav>
      <h1 tabIndex={-1}>{current?.filename ?? 'Document'}</h1>
      <ErrorNotice error={document.error} />
      {current && <DocumentFacts document={current} />}
      {current && (
        <>
          <div role="tablist" aria-label="Views of the document" class="tabs">
            {tabs.map((item) => (
              <button
                key={item.id}
                type="button"
                role="tab"
                id={`tab-${item.id}`}
                aria-selected={tab === item.id}
                aria-controls={tab === item.id ? `panel-${item.id}` : undefined}
                tabIndex={tab === item.id ? 0 : -1}
                onClick={() => setTab(item.id)}
                onKeyDown={(event) => {
                  const at = tabs.findIndex((candidate) => candidate.id === tab);
                  const targets: Record<string, number> = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 };
                  if (!(event.key in targets)) return;
                  event.preventDefault();
                  const next = tabs[(targets[event.key]! + tabs.length) % tabs.length]!;
                  setTab(next.id);
                  (event.currentTarget.parentElement?.querySelector(`#tab-${next.id}`) as HTMLElement | null)?.focus();
                }}
              >
                {item.label}
              </button>
            ))}
          </div>
          <div role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`} class="panel">
            {tab === 'passage' && citation && <Passage document={current} citation={citation} isPdf={isPdf} />}
            {tab === 'chunks' && <Chunks document={current} />}
            {tab === 'grep' && <Grep document={current} />}
          </div>
        </>
      )}
    </section>
  );
}

function DocumentFacts({ document }: { document: KbDocument }) {
  const { stage, progress } = stageOf(document);
  return (
    <dl class="facts">
      <div>
        <dt>Status</dt>
        <dd>
          <span class={`badge ${document.status}`}>{stage}</span>
          {document.status === 'processing' && <ProgressBar value={progress} label="Processing" />}
          {stage === 'ocr' && (
            <span class="muted">
              OCR: page {document.ocr_pages_done + 1} of {document.ocr_pages_total}
            </span>
          )}
          {document.error && <span class="failure">{document.error}</span>}
        </dd>
      </div>
      <div>
        <dt>Type</dt>
        <dd>{document.content_type}</dd>
      </div>
      <div>
        <dt>Size</dt>
        <dd>{formatBytes(document.size_bytes)}</dd>
      </div>
      <div>
        <dt>Pages</dt>
        <dd>{document.page_count ?? '–'}</dd>
      </div>
      <div>
        <dt>Chunks</dt>
        <dd>{document.chunk_count}</dd>
      </div>
    </dl>
  );
}

/** The cited page first, then the chunk's later pages. */
function candidatePages(page: number, metadata: unknown): number[] {
  const pages = (metadata as { pages?: unknown } | null)?.pages;
  const later = Array.isArray(pages) ? pages.filter((value): value is number => typeof value === 'number' && value > page) : [];
  return [page, ...later];
}

/** Where a chunk is, as labels beside it: its pages (or its sheet and cells), and whether its text was read by OCR. */
function PagesLabel({ metadata }: { metadata: unknown }) {
  const label = pagesText(metadata);
  const { sheet, range, ocr, ocrConfidence } = (metadata ?? {}) as { sheet?: unknown; range?: unknown; ocr?: unknown; ocrConfidence?: unknown };
  return (
    <>
      {label !== null && <span class="page">{label}</span>}
      {typeof sheet === 'string' && <span class="page">{typeof range === 'string' ? `${sheet}, ${range}` : sheet}</span>}
      {ocr === true && (
        <span class="page ocr" title="This text was recognised from an image of the page (OCR) and may hold misread words.">
          recognised text{typeof ocrConfidence === 'number' ? `, ${Math.round(ocrConfidence)} % sure` : ''}
        </span>
      )}
    </>
  );
}

function pagesText(metadata: unknown) {
  const pages = (metadata as { pages?: unknown } | null)?.pages;
  if (Array.isArray(pages) && pages.length > 1) return `pages ${pages[0]}–${pages[pages.length - 1]}`;
  const page = pageOf(metadata);
  return page === null ? null : `page ${page}`;
}

function Chunks({ document }: { document: KbDocument }) {
  const { api } = useAccount();
  const [chunks, setChunks] = useState<Chunk[]>([]);
  const [cursor, setCursor] = useState<string | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(false);
  const load = async (after: string | undefined) => {
    setLoading(true);
    try {
      const pending = api.GET('/v1/kb/documents/{id}/chunks', { params: { path: { id: document.id }, query: { workspace_id: document.workspace_id, limit: 50, ...(after && { cursor: after }) } } });
      const page = await call(pending);
      setChunks((current) => (after ? [...current, ...page] : page));
      setCursor(nextCursor((await pending).response));
    } catch (failure) {
      setError(failure);
    } finally {
      setLoading(false);
    }
  };
  useEffect(() => void load(undefined), [document.id]);
  if (error) return <ErrorNotice error={error} />;
  if (cursor === undefined) return <p class="loading">Loading chunks…</p>;
  if (chunks.length === 0) return <Empty>No chunks{document.status === 'ready' ? '' : ' yet: the document is not processed'}.</Empty>;
  return (
    <>
      <ol class="chunks">
        {chunks.map((chunk) => (
          <li key={chunk.chunk_index} class="chunk">
            <div class="chunk-head">
              <span>Chunk {chunk.chunk_index}</span>
              <PagesLabel metadata={chunk.metadata} />
              <span class="muted">{chunk.token_count} tokens</span>
            </div>
            <p class="chunk-text">{chunk.content}</p>
          </li>
        ))}
      </ol>
      {cursor && (
        <button type="button" onClick={() => load(cursor)} disabled={loading}>
          Show more chunks
        </button>
      )}
    </>
  );
}

function Grep({ document }: { document: KbDocument }) {
  const { api } = useAccount();
  const [pattern, setPattern] = useState('');
  const [caseSensitive, setCaseSensitive] = useState(false);
  const [result, setResult] = useState<GrepResult | null>(null);
  const [error, setError] = useState<unknown>(null);
  const run = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      setResult(
        await call(
          api.GET('/v1/kb/documents/{id}/grep', {
            params: { path: { id: document.id }, query: { workspace_id: document.workspace_id, pattern, case_sensitive: caseSensitive ? 'true' : 'false' } },
          }),
        ),
      );
    } catch (failure) {
      setResult(null);
      setError(failure);
    }
  };
  return (
    <>
      <form class="inline" onSubmit={run}>
        <label for="grep-pattern">Pattern</label>
        <input id="grep-pattern" value={pattern} placeholder="a word or a regular expression (RE2)" onInput={(event) => setPattern(event.currentTarget.value)} required />
        <label class="check">
          <input type="checkbox" checked={caseSensitive} onChange={(event) => setCaseSensitive(event.currentTarget.checked)} /> Match case
        </label>
        <button type="submit" class="primary">
          Find
        </button>
      </form>
      <ErrorNotice error={error} />
      {result && (
        <>
          <p role="status">
            {result.total_matches.toLocaleString()} match{result.total_matches === 1 ? '' : 'es'} in {result.chunks.length} chunk{result.chunks.length === 1 ? '' : 's'}
            {result.truncated ? ' (only the first are shown)' : ''}.
          </p>
          <ol class="chunks">
            {result.chunks.map((chunk) => (
              <li key={chunk.chunk_index} class="chunk">
                <div class="chunk-head">
                  <a href={citationHref(document.workspace_id, document.id, { chunk: chunk.chunk_index, start: null, end: null, page: pageOf(chunk.metadata) })}>Chunk {chunk.chunk_index}</a>
                  <PagesLabel metadata={chunk.metadata} />
                  <span class="muted">{chunk.matches.length} here</span>
                </div>
                <p class="chunk-text">
                  <Highlighted text={chunk.content} ranges={chunk.matches} />
                </p>
              </li>
            ))}
          </ol>
        </>
      )}
    </>
  );
}

/** The cited chunk with the quote highlighted, and for a PDF the page itself, rendered, with the quote marked on it. */
function Passage({ document, citation, isPdf }: { document: KbDocument; citation: Citation; isPdf: boolean }) {
  const { api } = useAccount();
  const context = useLoad<ContextResult>(
    (signal) =>
      call(
        api.GET('/v1/kb/documents/{id}/chunks/{chunk_index}/context', {
          params: { path: { id: document.id, chunk_index: String(citation.chunk) }, query: { workspace_id: document.workspace_id, before: 1, after: 1 } },
          signal,
        }),
      ),
    [document.id, citation.chunk],
  );
  const target = context.value?.chunks.find((chunk) => chunk.is_target);
  const quote = target && citation.start !== null && citation.end !== null ? target.content.slice(citation.start, citation.end) : null;
  const page = citation.page ?? (target ? pageOf(target.metadata) : null);
  return (
    <div class={isPdf ? 'passage with-page' : 'passage'}>
      {isPdf && page !== null && target && <PdfPage document={document} candidates={candidatePages(page, target.metadata)} quote={quote ?? target.content.slice(0, 200)} />}
      <div class="passage-text">
        <h2>
          Chunk {citation.chunk}
          {page !== null && <span class="page"> page {page}</span>}
        </h2>
        <ErrorNotice error={context.error} />
        {context.value?.chunks.map((chunk) => (
          <p key={chunk.chunk_index} class={chunk.is_target ? 'chunk-text target' : 'chunk-text neighbour'} data-testid={chunk.is_target ? 'cited-chunk' : undefined}>
            {chunk.is_target && citation.start !== null && citation.end !== null ? (
              <Highlighted text={chunk.content} ranges={[{ start: citation.start, end: citation.end }]} />
            ) : (
              chunk.content
            )}
          </p>
        ))}
      </div>
    </div>
  );
}

// The file of the PDF last opened, so that moving between a document's tabs and citations does
// not download it again (this tab's memory only; a few files at most).
const recentFiles = new Map<string, Promise<ArrayBuffer>>();

function fileOf(api: ReturnType<typeof useAccount>['api'], document: KbDocument): Promise<ArrayBuffer> {
  const key = `${document.id}:${document.sha256}`;
  let bytes = recentFiles.get(key);
  if (!bytes) {
    bytes = call(
      api.GET('/v1/kb/documents/{id}/file', { params: { path: { id: document.id }, query: { workspace_id: document.workspace_id } }, parseAs: 'arrayBuffer' }),
    ).then((data) => data as unknown as ArrayBuffer);
    bytes.catch(() => recentFiles.delete(key));
    recentFiles.set(key, bytes);
    while (recentFiles.size > 3) recentFiles.delete(recentFiles.keys().next().value!);
  }
  return bytes;
}

/**
 * The cited page of a PDF, rendered, with the quote marked on it. The citation names the page its
 * chunk starts on; a quote further into a chunk that spans pages is looked for on the chunk's
 * next pages, and the page where it stands is shown.
 */
function PdfPage({ document, candidates, quote }: { document: KbDocument; candidates: number[]; quote: string | null }) {
  const { api } = useAccount();
  const [page, setPage] = useState(candidates[0]!);
  const [pdf, setPdf] = useState<PDFDocumentProxy | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [found, setFound] = useState<boolean | null>(null);
  const [width, setWidth] = useState(0);
  // While looking for the quote: the candidate pages not tried yet. Null once the search is over.
  const searching = useRef<number[] | null>(candidates.slice(1));
  // The page the quote stands on (once found), marked again whenever that page is drawn.
  const quotePage = useRef(candidates[0]!);
  const holder = useRef<HTMLElement>(null);
  const canvasHolder = useRef<HTMLDivElement>(null);

  useEffect(() => {
    searching.current = candidates.slice(1);
    quotePage.current = candidates[0]!;
    setFound(null);
    setPage(candidates[0]!);
  }, [candidates.join(','), quote]);

  useEffect(() => {
    let cancelled = false;
    let opened: PDFDocumentProxy | null = null;
    (async () => {
      const bytes = await fileOf(api, document);
      const { openPdf } = await import('../pdf.js');
      // pdf.js takes the buffer over: it gets a copy, and the kept one stays usable.
      opened = await openPdf(bytes.slice(0));
      if (cancelled) void opened.destroy();
      else setPdf(opened);
    })().catch((failure) => !cancelled && setError(failure));
    return () => {
      cancelled = true;
      void opened?.destroy();
    };
  }, [document.id]);

  // The page is drawn as wide as its box, and again when the box changes width (a phone turned).
  useEffect(() => {
    const element = holder.current;
    if (!element) return;
    const measure = () => setWidth(Math.min(Math.max(element.clientWidth - 16, 200), 900));
    measure();
    const observer = new ResizeObserver(() => measure());
    observer.observe(element);
    return () => observer.disconnect();
  }, []);

  useEffect(() => {
    if (!pdf || !canvasHolder.current || width === 0) return;
    const controller = new AbortController();
    const looking = searching.current !== null;
    import('../pdf.js')
      .then(({ renderPage }) => renderPage(pdf, page, canvasHolder.current!, width, looking || page === quotePage.current ? quote : null, controller.signal))
      .then((located) => {
        if (controller.signal.aborted) return;
        if (!looking) return;
        const next = searching.current!.shift();
        if (!located && next !== undefined && next <= pdf.numPages) return setPage(next);
        searching.current = null;
        if (located) quotePage.current = page;
        setFound(located);
        // Found nowhere: back to the cited page, saying so.
        if (!located && page !== candidates[0]) setPage(candidates[0]!);
      }, (failure) => !controller.signal.aborted && setError(failure));
    return () => controller.abort();
  }, [pdf, page, quote, width]);

  const pages = pdf?.numPages ?? document.page_count ?? page;
  const move = (step: number) => {
    searching.current = null;
    setPage((value) => Math.min(Math.max(1, value + step), pages));
  };
  return (
    <figure class="pdf" ref={holder} aria-label={`Page ${page} of ${document.filename}`}>
      <div class="pdf-controls">
        <button type="button" onClick={() => move(-1)} disabled={page <= 1} aria-label="Previous page">
          ‹
        </button>
        <span aria-live="polite">
          Page {page} of {pages}
        </span>
        <button type="button" onClick={() => move(1)} disabled={page >= pages} aria-label="Next page">
          ›
        </button>
      </div>
      <ErrorNotice error={error} />
      {!pdf && !error && <p class="loading">Rendering the page…</p>}
      <div class="pdf-page" ref={canvasHolder} data-testid="pdf-page" data-page={page} data-quote-found={found === null ? undefined : String(found)} />
      {found === false && <figcaption class="muted">The quote could not be located on the rendered pages; it is highlighted in the text beside them.</figcaption>}
    </figure>
  );
}
