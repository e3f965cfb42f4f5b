/** Formatting of the ingestion benchmark's results: a text table and a self-contained HTML page. */

import { escapeHtml } from './helpers.js';

export type Mode = 'in-process' | 'end to end';

export type Measurement = {
  dataset: string;
  mode: Mode;
  /** What `units` counts: PDF pages or documents. */
  unit: 'pages' | 'docs';
  units: number;
  chunks: number;
  seconds: number;
  /** Highest resident set size of the whole process (main thread, workers, embedded store) during the step. */
  peakRssBytes: number;
};

export type Report = {
  date: string;
  machine: string;
  chunkOptions: { chunkTokens: number; overlapTokens: number };
  measurements: Measurement[];
  /** Free-form lines printed under the table (verdicts, notes). */
  notes: string[];
};

const rate = (count: number, seconds: number) => (seconds > 0 ? count / seconds : 0);
const megabytes = (bytes: number) => bytes / (1024 * 1024);

function formatNumber(value: number): string {
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  if (value >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

function rows(report: Report): string[][] {
  return report.measurements.map((m) => [
    `${m.dataset}, ${m.mode}`,
    m.units.toLocaleString('en-US') + ' ' + m.unit,
    m.chunks.toLocaleString('en-US'),
    m.seconds.toFixed(2),
    `${formatNumber(rate(m.units, m.seconds))} ${m.unit}/s`,
    formatNumber(rate(m.chunks, m.seconds)),
    `${Math.round(megabytes(m.peakRssBytes))} MB`,
  ]);
}

const headers = ['what', 'size', 'chunks', 'seconds', 'pages/s or docs/s', 'chunks/s', 'peak RSS'];

export function textTable(report: Report): string {
  const body = rows(report);
  const widths = headers.map((header, column) => Math.max(header.length, ...body.map((row) => row[column]!.length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ');
  return [line(headers), widths.map((width) => '-'.repeat(width)).join('  '), ...body.map(line)].join('\n');
}


type Bar = { label: string; value: number; color: string };

const modeColor: Record<Mode, string> = { 'in-process': '#4e79a7', 'end to end': '#f28e2b' };

/**
 * One small horizontal bar chart with its own scale. `limit`, when given, draws a dashed
 * vertical line (a requirement such as "under 60 s").
 */
function barChart(title: string, bars: Bar[], format: (value: number) => string, limit?: { value: number; label: string }): string {
  const width = 320;
  const labelWidth = 86;
  const valueWidth = 64;
  const barHeight = 22;
  const gap = 10;
  const top = 28;
  const plotWidth = width - labelWidth - valueWidth;
  const height = top + bars.length * (barHeight + gap) + (limit ? 14 : 4);
  const maximum = Math.max(...bars.map((bar) => bar.value), limit?.value ?? 0) || 1;
  const x = (value: number) => labelWidth + (value / maximum) * plotWidth;

  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${escapeHtml(title)}">`,
    `<text x="0" y="16" font-size="13" font-weight="600">${escapeHtml(title)}</text>`,
  ];
  bars.forEach((bar, index) => {
    const y = top + index * (barHeight + gap);
    const barWidth = Math.max(1, x(bar.value) - labelWidth);
    parts.push(
      `<text x="${labelWidth - 6}" y="${y + barHeight / 2 + 4}" font-size="12" text-anchor="end">${escapeHtml(bar.label)}</text>`,
      `<rect x="${labelWidth}" y="${y}" width="${barWidth.toFixed(1)}" height="${barHeight}" fill="${bar.color}" rx="2"><title>${escapeHtml(`${bar.label}: ${format(bar.value)}`)}</title></rect>`,
      `<text x="${(labelWidth + barWidth + 4).toFixed(1)}" y="${y + barHeight / 2 + 4}" font-size="12">${escapeHtml(format(bar.value))}</text>`,
    );
  });
  if (limit) {
    const lineX = x(limit.value).toFixed(1);
    const bottom = top + bars.length * (barHeight + gap) - gap / 2;
    parts.push(
      `<line x1="${lineX}" y1="${top - 4}" x2="${lineX}" y2="${bottom}" stroke="#c0392b" stroke-width="1.5" stroke-dasharray="4 3"/>`,
      `<text x="${lineX}" y="${bottom + 12}" font-size="11" fill="#c0392b" text-anchor="middle">${escapeHtml(limit.label)}</text>`,
    );
  }
  parts.push('</svg>');
  return parts.join('\n');
}

/** A page with no external assets: inline CSS, inline SVG charts (one row per dataset), the table. */
export function htmlReport(report: Report, pdfLimitSeconds: { dataset: string; seconds: number }): string {
  const datasets = [...new Set(report.measurements.map((m) => m.dataset))];
  const chartRows = datasets.map((dataset) => {
    const measured = report.measurements.filter((m) => m.dataset === dataset);
    const unit = measured[0]!.unit;
    const barsOf = (value: (m: Measurement) => number): Bar[] => measured.map((m) => ({ label: m.mode, value: value(m), color: modeColor[m.mode] }));
    const limit = dataset === pdfLimitSeconds.dataset ? { value: pdfLimitSeconds.seconds, label: `limit ${pdfLimitSeconds.seconds} s` } : undefined;
    const charts = [
      barChart('seconds (lower is better)', barsOf((m) => m.seconds), (v) => `${v.toFixed(2)} s`, limit),
      barChart(`${unit}/s`, barsOf((m) => rate(m.units, m.seconds)), formatNumber),
      barChart('chunks/s', barsOf((m) => rate(m.chunks, m.seconds)), formatNumber),
      barChart('peak RSS (MB)', barsOf((m) => megabytes(m.peakRssBytes)), (v) => `${Math.round(v)} MB`),
    ];
    return `<section><h2>${escapeHtml(dataset)}</h2><div class="charts">${charts.map((chart) => `<figure>${chart}</figure>`).join('')}</div></section>`;
  });

  const tableRows = rows(report)
    .map((row) => `<tr>${row.map((cell, column) => (column === 0 ? `<th scope="row">${escapeHtml(cell)}</th>` : `<td>${escapeHtml(cell)}</td>`)).join('')}</tr>`)
    .join('\n');

  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Ingestion benchmark</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
  h1 { font-size: 1.4rem; margin-bottom: 0.2rem; }
  h2 { font-size: 1.1rem; margin: 1.5rem 0 0.5rem; }
  .meta { color: #555; margin-top: 0; }
  .charts { display: flex; flex-wrap: wrap; gap: 1.5rem; }
  figure { margin: 0; }
  svg text { font-family: system-ui, sans-serif; }
  table { border-collapse: collapse; margin-top: 1.5rem; }
  th, td { border-bottom: 1px solid #ddd; padding: 0.3rem 0.7rem; text-align: right; }
  th[scope="row"], thead th:first-child { text-align: left; font-weight: normal; }
  .legend span { display: inline-block; width: 0.8rem; height: 0.8rem; margin: 0 0.3rem 0 1rem; vertical-align: middle; }
  ul { color: #444; }
</style>
</head>
<body>
<h1>Ingestion benchmark</h1>
<p class="meta">${escapeHtml(report.date)} · ${escapeHtml(report.machine)} · chunks of ${report.chunkOptions.chunkTokens} tokens, ${report.chunkOptions.overlapTokens} overlap</p>
<p class="legend">${(Object.keys(modeColor) as Mode[]).map((mode) => `<span style="background:${modeColor[mode]}"></span>${escapeHtml(mode === 'in-process' ? 'parse + chunk in-process' : 'end to end: HTTP upload until ready')}`).join('')}</p>
${chartRows.join('\n')}
<table>
<thead><tr>${headers.map((header) => `<th>${escapeHtml(header)}</th>`).join('')}</tr></thead>
<tbody>
${tableRows}
</tbody>
</table>
<ul>
${report.notes.map((note) => `<li>${escapeHtml(note)}</li>`).join('\n')}
</ul>
</body>
</html>
`;
}
