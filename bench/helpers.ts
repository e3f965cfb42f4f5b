/** What every benchmark script needs: logging, knobs, statistics, progress bars and tables. */
import os from 'node:os';
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
