import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { MultiBar, Presets } from 'cli-progress';

export type ImportOptions = { url: string; apiKey: string; workspace: string; concurrency: number; pollMs: number };

type DocumentBody = { id: string; filename: string; status: string; error: string | null; page_count: number | null; chunk_count: number };

export class ImportError extends Error {}

async function api(options: ImportOptions, method: string, pathname: string, init: { json?: unknown; form?: FormData } = {}) {
  const headers: Record<string, string> = { authorization: `Bearer ${options.apiKey}` };
  let body: string | FormData | undefined = init.form;
  if (init.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(init.json);
  }
  let response: Response;
  try {
    response = await fetch(new URL(pathname, options.url), { method, headers, body });
  } catch (error) {
    throw new ImportError(`cannot reach ${options.url}: ${(error as Error).message} (is kb serve running?)`);
  }
  const parsed = response.status === 204 ? undefined : await response.json().catch(() => undefined);
  return { status: response.status, body: parsed as any, link: response.headers.get('link') };
}

/** Every regular file under the given paths, directories walked recursively, hidden entries skipped. */
export async function collectFiles(paths: string[]): Promise<string[]> {
  const files: string[] = [];
  const visit = async (entry: string) => {
    const info = await stat(entry).catch(() => {
      throw new ImportError(`no such file or directory: ${entry}`);
    });
    if (info.isDirectory()) {
      const children = (await readdir(entry)).filter((name) => !name.startsWith('.')).sort();
      for (const child of children) await visit(path.join(entry, child));
    } else if (info.isFile()) {
      files.push(entry);
    }
  };
  for (const entry of paths) await visit(entry);
  return files;
}

async function resolveWorkspace(options: ImportOptions): Promise<{ id: string; name: string }> {
  const byId = /^[0-9a-f-]{36}$/i.test(options.workspace) ? await api(options, 'GET', `/v1/kb/workspaces/${options.workspace}`) : undefined;
  if (byId?.status === 200) return byId.body;
  let next: string | null = '/v1/kb/workspaces?limit=1000';
  while (next) {
    const page = await api(options, 'GET', next);
    if (page.status !== 200) throw new ImportError(`listing workspaces failed: ${page.body?.message ?? page.status}`);
    const match = (page.body as { id: string; name: string }[]).find((workspace) => workspace.name.toLowerCase() === options.workspace.toLowerCase());
    if (match) return match;
    next = /<([^>]+)>;\s*rel="next"/.exec(page.link ?? '')?.[1] ?? null;
  }
  throw new ImportError(`no workspace with id or name "${options.workspace}"`);
}

/**
 * Uploads the files to a workspace through the API, then follows their processing until each
 * is ready or failed, with a progress bar for each stage. Returns the final documents.
 */
export async function importFiles(paths: string[], options: ImportOptions, output: NodeJS.WritableStream = process.stderr) {
  const files = await collectFiles(paths);
  if (files.length === 0) throw new ImportError('no files to import');
  const workspace = await resolveWorkspace(options);
  const bars = new MultiBar(
    { format: ' {stage} [{bar}] {value}/{total} {detail}', hideCursor: true, clearOnComplete: false, stream: output, noTTYOutput: true, notTTYSchedule: 2000 },
    Presets.shades_classic,
  );
  const uploadBar = bars.create(files.length, 0, { stage: 'upload ', detail: '' });
  const processBar = bars.create(files.length, 0, { stage: 'process', detail: '' });
  const rejected: { file: string; reason: string }[] = [];
  const documents = new Map<string, DocumentBody>();
  const queue = [...files];
  const uploadOne = async () => {
    for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
      const form = new FormData();
      form.set('file', new File([await readFile(file)], path.basename(file)));
      const response = await api(options, 'POST', `/v1/kb/workspaces/${workspace.id}/documents`, { form });
      if (response.status === 202) {
        for (const document of response.body as DocumentBody[]) documents.set(document.id, document);
      } else {
        rejected.push({ file, reason: response.body?.message ?? `HTTP ${response.status}` });
        processBar.setTotal(processBar.getTotal() - 1);
      }
      uploadBar.increment(1, { detail: path.basename(file) });
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(options.concurrency, files.length) }, uploadOne));
    processBar.setTotal(documents.size);
    const pending = new Set(documents.keys());
    while (pending.size > 0) {
      for (const id of [...pending]) {
        const response = await api(options, 'GET', `/v1/kb/documents/${id}`);
        if (response.status !== 200) throw new ImportError(`reading document ${id} failed: ${response.body?.message ?? response.status}`);
        const document = response.body as DocumentBody;
        documents.set(id, document);
        if (document.status === 'ready' || document.status === 'failed') pending.delete(id);
      }
      processBar.update(documents.size - pending.size, { detail: pending.size > 0 ? `${pending.size} waiting` : '' });
      if (pending.size > 0) await new Promise((resolve) => setTimeout(resolve, options.pollMs));
    }
  } finally {
    bars.stop();
  }
  return { workspace, documents: [...documents.values()], rejected };
}
