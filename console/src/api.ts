// The console's only way to the service: the typed client (@kb/client) over the public REST
// API, with the key the user pasted. Errors become sentences a person can act on.
import { createClient, KbApiError, unwrap, type components, type KbClient, type paths } from '@kb/client';

export { KbApiError };
export type AgentEvent = components['schemas']['AgentEvent'];

type Json<Path extends keyof paths, Method extends keyof paths[Path]> = paths[Path][Method] extends {
  responses: infer Responses;
}
  ? Responses extends { 200: { content: { 'application/json': infer Body } } }
    ? Body
    : Responses extends { 201: { content: { 'application/json': infer Body } } }
      ? Body
      : Responses extends { 202: { content: { 'application/json': infer Body } } }
        ? Body
        : never
  : never;

export type Me = Json<'/v1/user/me', 'get'>;
export type Credits = Json<'/v1/user/me/credits', 'get'>;
export type Workspace = Json<'/v1/kb/workspaces/{id}', 'get'>;
export type WorkspaceStats = Json<'/v1/kb/workspaces/{id}/stats', 'get'>;
export type KbDocument = Json<'/v1/kb/documents/{id}', 'get'>;
export type Chunk = Json<'/v1/kb/documents/{id}/chunks', 'get'>[number];
export type GrepResult = Json<'/v1/kb/documents/{id}/grep', 'get'>;
export type ContextResult = Json<'/v1/kb/documents/{id}/chunks/{chunk_index}/context', 'get'>;
export type SearchResult = Json<'/v1/kb/query', 'post'>['results'][number];
export type ApiKey = Json<'/v1/user/me/api-keys', 'get'>[number];
export type NewApiKey = Json<'/v1/user/me/api-keys', 'post'>;
export type ChatSession = Json<'/v1/chat/sessions/{id}', 'get'>;
export type ChatSessionSummary = Json<'/v1/chat/sessions', 'get'>[number];
export type ChatMessage = ChatSession['messages'][number];
export type Scope = NonNullable<paths['/v1/user/me/api-keys']['post']['requestBody']>['content']['application/json']['scopes'][number];
export const allScopes: Scope[] = ['user:read', 'user:write', 'kb:read', 'kb:write', 'chat:read', 'chat:write'];

export type Source = Extract<AgentEvent, { type: 'sources' }>['sources'][number];
export type ReasoningStep = Extract<AgentEvent, { type: 'reasoning' }>['steps'][number];

const keyStorage = 'kb-console-key';

/** The key is kept in sessionStorage: this tab only, gone when it closes. */
export const storedKey = () => sessionStorage.getItem(keyStorage);
export const storeKey = (key: string | null) => (key ? sessionStorage.setItem(keyStorage, key) : sessionStorage.removeItem(keyStorage));

export type Api = KbClient & { key: string };

export function connect(key: string): Api {
  return Object.assign(createClient({ baseUrl: location.origin, apiKey: key }), { key });
}

type Result<Data> = { data?: Data; error?: unknown; response: Response };

/** The call's body, or a KbApiError carrying the service's code and message (the client's `unwrap`); no answer at all is one too. */
export async function call<Data>(pending: Promise<Result<Data>>): Promise<Data> {
  let result: Result<Data>;
  try {
    result = await pending;
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new KbApiError(0, 'network', 'The service did not answer: it may be stopped or unreachable.', null);
  }
  return unwrap(result);
}

/** The `rel="next"` cursor of a list answer's `Link` header, if there is a next page. */
export function nextCursor(response: Response): string | null {
  const link = response.headers.get('link');
  const next = link?.split(',').find((part) => /rel="?next"?/.test(part));
  const target = next?.match(/<([^>]+)>/)?.[1];
  return target ? new URL(target, location.origin).searchParams.get('cursor') : null;
}

/** Every page of a list endpoint (the console's lists are short; 100 a page). */
export async function listAll<Item>(fetchPage: (cursor: string | undefined) => Promise<Result<Item[]>>, most = 1000): Promise<Item[]> {
  const items: Item[] = [];
  let cursor: string | undefined;
  for (;;) {
    const pending = fetchPage(cursor);
    const page = await call(pending);
    items.push(...page);
    const { response } = await pending;
    const next = nextCursor(response);
    if (!next || items.length >= most) return items;
    cursor = next;
  }
}

/** Something the console says about a run that did not end in an answer, under its own title. */
export class ConsoleNotice extends Error {
  constructor(
    readonly title: string,
    message: string,
  ) {
    super(message);
  }
}

/** What went wrong, in words: what the service said, and what to do about it. */
export function describeError(error: unknown): { title: string; detail: string; requestId: string | null } {
  if (error instanceof ConsoleNotice) return { title: error.title, detail: error.message, requestId: null };
  if (!(error instanceof KbApiError)) {
    return { title: 'Something went wrong in the console', detail: error instanceof Error ? error.message : String(error), requestId: null };
  }
  const said = error.message;
  const titles: Record<number, string> = {
    0: 'No connection to the service',
    400: 'The request was not accepted',
    401: 'The key was not accepted',
    402: 'Not enough credits',
    403: 'This key is not allowed to do that',
    404: 'Not found',
    409: 'That conflicts with the current state',
    413: 'Too large',
    415: 'Unsupported file type',
    422: 'The request was not accepted',
    429: 'Too many requests',
    503: 'The service is not ready',
  };
  const advice: Record<number, string> = {
    0: 'Check that the service is running, then try again.',
    401: 'Sign out and paste a valid, unrevoked API key.',
    402: 'Each answer costs credits (deep answers cost more). Ask the operator to grant credits (kb credits grant --email <you> --amount <n>), or use fast mode if it fits your balance.',
    403: 'Create a key with the missing scope on the API keys page, or sign in with a key that has it.',
    413: 'Split the file, or ask the operator to raise the upload limit.',
    415: 'Upload PDF, DOCX, HTML, Markdown, plain text, CSV or JSON.',
    429: 'Wait a moment and try again.',
    503: 'Try again in a moment.',
  };
  const title = titles[error.status] ?? (error.status >= 500 ? 'The service failed' : `Refused (${error.status})`);
  const detail = [said.endsWith('.') ? said : `${said}.`, advice[error.status]].filter(Boolean).join(' ');
  return { title, detail: detail.charAt(0).toUpperCase() + detail.slice(1), requestId: error.requestId };
}

/**
 * Uploads one file with XMLHttpRequest, the one browser API that reports upload progress.
 * Resolves with the documents the service queued.
 */
export function uploadFile(
  key: string,
  workspaceId: string,
  file: File,
  onProgress: (sent: number, total: number) => void,
  signal?: AbortSignal,
): Promise<KbDocument[]> {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open('POST', `/v1/kb/workspaces/${encodeURIComponent(workspaceId)}/documents`);
    request.setRequestHeader('authorization', `Bearer ${key}`);
    request.setRequestHeader('idempotency-key', crypto.randomUUID());
    request.responseType = 'json';
    request.upload.onprogress = (event) => onProgress(event.loaded, event.lengthComputable ? event.total : file.size);
    request.onload = () => {
      const body = request.response as { error?: string; message?: string } | KbDocument[] | null;
      if (request.status === 202 && Array.isArray(body)) resolve(body);
      else {
        const refusal = (body ?? {}) as { error?: string; message?: string };
        reject(new KbApiError(request.status, refusal.error ?? 'unknown', refusal.message ?? request.statusText, request.getResponseHeader('x-request-id')));
      }
    };
    request.onerror = () => reject(new KbApiError(0, 'network', 'The upload was cut off before the service answered.', null));
    request.onabort = () => reject(new DOMException('aborted', 'AbortError'));
    signal?.addEventListener('abort', () => request.abort(), { once: true });
    const form = new FormData();
    form.append('file', file, file.name);
    request.send(form);
  });
}

/** The processing stage of a document (the service's `stage`) and how far along it is (0 to 1; null when unknown). */
export function stageOf(document: KbDocument): { stage: KbDocument['stage']; progress: number | null } {
  if (document.stage === 'embedding') return { stage: 'embedding', progress: document.chunk_count > 0 ? document.embedded_chunks / document.chunk_count : null };
  if (document.stage === 'ocr') return { stage: 'ocr', progress: document.ocr_pages_total > 0 ? document.ocr_pages_done / document.ocr_pages_total : null };
  return { stage: document.stage, progress: document.stage === 'ready' ? 1 : null };
}

export const isSettled = (document: KbDocument) => document.status === 'ready' || document.status === 'failed';

/** The page a chunk starts on, when its document has pages. */
export const pageOf = (metadata: unknown): number | null => {
  const page = (metadata as { page?: unknown } | null)?.page;
  return typeof page === 'number' ? page : null;
};

export const formatBytes = (bytes: number) =>
  bytes < 1024 ? `${bytes} B` : bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KB` : `${(bytes / 1024 / 1024).toFixed(1)} MB`;

export const formatDate = (iso: string) => new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
