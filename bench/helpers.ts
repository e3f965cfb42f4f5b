/** What every benchmark script needs: logging, knobs, statistics, progress bars and tables. */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import cliProgress from 'cli-progress';

/** Progress and notes go to stderr; stdout keeps the tables. */
export const log = (message: string) => process.stderr.write(`${message}\n`);
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const elapsedSeconds = (start: number) => (performance.now() - start) / 1000;
export const loadNow = () => os.loadavg().map((value) => value.toFixed(2)).join(' / ');

/** An integer knob from the environment: `fallback` when unset, an error below `minimum`. */
export function intFromEnv(name: string, fallback: number, minimum = 1): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < minimum) throw new Error(`${name} must be an integer >= ${minimum}, got ${JSON.stringify(raw)}`);
  return value;
}

/** `--index pgvector|elasticsearch` (or `--index=...`; `embedded` means pgvector); pgvector when absent. */
export function indexKindFromArgs(argv: string[], script: string): 'pgvector' | 'elasticsearch' {
  for (let position = 0; position < argv.length; position++) {
    const arg = argv[position]!;
    const value = arg === '--index' ? argv[++position] : arg.startsWith('--index=') ? arg.slice('--index='.length) : undefined;
    if (arg !== '--index' && value === undefined) throw new Error(`unknown argument ${arg}; usage: ${script} [--index pgvector|elasticsearch]`);
    if (value === 'elasticsearch' || value === 'pgvector' || value === 'embedded') return value === 'elasticsearch' ? 'elasticsearch' : 'pgvector';
    throw new Error(`--index must be pgvector or elasticsearch, got ${JSON.stringify(value)}`);
  }
  return 'pgvector';
}

/** Nearest-rank percentile. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const mean = (values: readonly number[]) => (values.length === 0 ? NaN : values.reduce((sum, value) => sum + value, 0) / values.length);

/**
 * A progress bar on stderr. When stderr is not a terminal it prints a line every
 * `everyMs` instead of redrawing.
 */
export function progressBar(format: string, options: { everyMs?: number; fps?: number; etaBuffer?: number } = {}) {
  return new cliProgress.SingleBar(
    { format, stream: process.stderr, hideCursor: true, noTTYOutput: true, notTTYSchedule: options.everyMs ?? 5_000, fps: options.fps ?? 5, etaBuffer: options.etaBuffer ?? 200 },
    cliProgress.Presets.shades_classic,
  );
}

export const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (character) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[character]!);

/** A plain-text table: the first column left-aligned, the others right-aligned unless told. */
export function textTable(headers: string[], rows: string[][], rightAligned: (column: number) => boolean = (column) => column > 0): string {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: string[]) =>
    cells.map((cell, column) => (rightAligned(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join('  ');
  return [line(headers), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

/** An HTML table whose first cell of each row heads the row. */
export function htmlTable(headers: string[], rows: string[][]): string {
  return `<table><thead><tr>${headers.map((header) => `<th>${escapeHtml(header)}</th>`).join('')}</tr></thead><tbody>${rows
    .map((row) => `<tr>${row.map((cell, column) => (column === 0 ? `<th scope="row">${escapeHtml(cell)}</th>` : `<td>${escapeHtml(cell)}</td>`)).join('')}</tr>`)
    .join('\n')}</tbody></table>`;
}

/** The machine a result was measured on, for the printed report. */
export function machineDescription(): string {
  const cpu = os.cpus()[0]?.model.trim() ?? 'unknown CPU';
  return `${os.availableParallelism()} cores (${cpu}), ${Math.round(os.totalmem() / 2 ** 30)} GiB RAM, Node ${process.version}, ${os.platform()} ${os.arch()}`;
}

/**
 * The service's HTTP API as the benchmarks call it: JSON requests and multipart uploads with one
 * key. `UploadedDocument` is what a benchmark reads of the documents an upload answers with.
 */
/** `GET /v1/kb/workspaces/{id}/stats`, as the benchmarks read it. */
export type WorkspaceStats = {
  document_count: number;
  chunk_count: number;
  embedded_chunk_count: number;
  documents_by_status: { queued: number; processing: number; ready: number; failed: number };
};

/** `Server-Timing: embed;dur=5.1, vector;dur=9.2` as { embed: 5.1, vector: 9.2 }. */
export function serverTimingParts(header: string | null): Record<string, number> {
  const parts: Record<string, number> = {};
  for (const entry of header?.split(',') ?? []) {
    const [name, ...parameters] = entry.trim().split(';');
    const duration = parameters.find((parameter) => parameter.trim().startsWith('dur='));
    if (name && duration) parts[name] = Number(duration.trim().slice(4));
  }
  return parts;
}

export class ServiceClient<UploadedDocument = { id: string; filename: string }> {
  constructor(
    readonly baseUrl: string,
    readonly key: string,
  ) {}

  /** A JSON request; anything but 2xx throws with the status and body. */
  async request<T>(method: string, pathname: string, body?: unknown): Promise<{ body: T; headers: Headers }> {
    const response = await fetch(new URL(pathname, this.baseUrl), {
      method,
      headers: { authorization: `Bearer ${this.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${pathname}: ${response.status} ${text}`);
    return { body: (text ? JSON.parse(text) : undefined) as T, headers: response.headers };
  }

  async json<T>(method: string, pathname: string, body?: unknown): Promise<T> {
    return (await this.request<T>(method, pathname, body)).body;
  }

  stats(workspaceId: string) {
    return this.json<WorkspaceStats>('GET', `/v1/kb/workspaces/${workspaceId}/stats`);
  }

  /** One multipart request with a `file` part per file, and a `metadata` part when given. */
  async upload(workspaceId: string, files: { name: string; bytes: Uint8Array | string }[], metadata?: Record<string, unknown>): Promise<UploadedDocument[]> {
    const form = new FormData();
    for (const file of files) form.append('file', new File([file.bytes as BlobPart], file.name));
    if (metadata) form.append('metadata', JSON.stringify(metadata));
    const response = await fetch(new URL(`/v1/kb/workspaces/${workspaceId}/documents`, this.baseUrl), {
      method: 'POST',
      headers: { authorization: `Bearer ${this.key}` },
      body: form,
    });
    const text = await response.text();
    if (response.status !== 202) throw new Error(`upload: ${response.status} ${text}`);
    return JSON.parse(text) as UploadedDocument[];
  }
}

/** The benchmarks' self-contained result page: a heading, a line of context, the body, the notes. */
export function resultPage(page: { title: string; heading: string; meta: string; body: string; notes: readonly string[] }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(page.title)}</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; max-width: 70rem; }
  h1 { font-size: 1.4rem; margin-bottom: 0.2rem; }
  h2 { font-size: 1.1rem; margin: 1.5rem 0 0.5rem; }
  .meta { color: #555; margin-top: 0; }
  svg text { font-family: system-ui, sans-serif; }
  table { border-collapse: collapse; margin-top: 0.5rem; }
  th, td { border-bottom: 1px solid #ddd; padding: 0.3rem 0.7rem; text-align: right; }
  th[scope="row"], thead th:first-child { text-align: left; font-weight: normal; white-space: pre; }
  ul { color: #444; }
</style>
</head>
<body>
<h1>${escapeHtml(page.heading)}</h1>
<p class="meta">${escapeHtml(page.meta)}</p>
${page.body}
<ul>
${page.notes.map((note) => `<li>${escapeHtml(note)}</li>`).join('\n')}
</ul>
</body>
</html>
`;
}

/** Runs a benchmark's main function: an error is printed with its stack and the exit code is 1. */
export function runBenchmark(main: () => Promise<void>) {
  main().catch((error: unknown) => {
    log(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exitCode = 1;
  });
}

/** Where the benchmarks write their results. */
export const resultsDir = path.resolve(import.meta.dirname, 'results');

/** Writes `<name>.json` and `<name>.html` to bench/results and says where. */
export async function writeResults(name: string, json: unknown, html: string) {
  await mkdir(resultsDir, { recursive: true });
  const jsonPath = path.join(resultsDir, `${name}.json`);
  const htmlPath = path.join(resultsDir, `${name}.html`);
  await writeFile(jsonPath, `${JSON.stringify(json, null, 1)}\n`);
  await writeFile(htmlPath, html);
  process.stdout.write(`\nresults: ${path.relative(process.cwd(), jsonPath)}, ${path.relative(process.cwd(), htmlPath)}\n`);
}

/**
 * Runs `cleanUp` and exits when the benchmark is interrupted (Ctrl-C), so no temporary store or
 * index is left behind; returns the function that stops listening, for when the run ends itself.
 */
export function cleanUpOnInterrupt(cleanUp: () => Promise<void>): () => void {
  const interrupted = () => {
    log('interrupted; cleaning up');
    void cleanUp().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  return () => process.off('SIGINT', interrupted);
}
