// The web console at / : the files scripts/build-console.mjs wrote to console/dist, served
// by the service itself. The page talks to the service's public REST API only, from the same
// origin, so its policy allows nothing from elsewhere.
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Negotiator from 'negotiator';
import { AppError, noEndpoint } from '../errors.js';
import { errorResponse, methodNotAllowed } from '../rest/error-response.js';

// src/http or dist/http: the package root is two levels up either way.
const defaultDirectory = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../console/dist');

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.bcmap': 'application/octet-stream',
  '.pfb': 'application/octet-stream',
  '.ttf': 'font/ttf',
};

/**
 * The headers of a page this server serves (the console, GraphiQL): a Content-Security-Policy
 * allowing this origin only, with `directives` replacing or adding to the base ones.
 */
export function pageSecurityHeaders(directives: Record<string, string> = {}) {
  const policy: Record<string, string> = {
    'default-src': "'self'",
    'script-src': "'self'",
    'style-src': "'self'",
    'img-src': "'self' data: blob:",
    'font-src': "'self' data:",
    'worker-src': "'self'",
    'connect-src': "'self'",
    'object-src': "'none'",
    'base-uri': "'none'",
    'form-action': "'none'",
    'frame-ancestors': "'none'",
    ...directives,
  };
  return {
    'content-security-policy': Object.entries(policy).map(([name, value]) => `${name} ${value}`).join('; '),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cross-origin-opener-policy': 'same-origin',
  };
}

// pdf.js decodes some images with WebAssembly and starts its worker from a blob; inline styles are
// set through the DOM (Preact, pdf.js's text layer), which `style-src 'self'` does not block.
const securityHeaders = pageSecurityHeaders({ 'script-src': "'self' 'wasm-unsafe-eval'", 'worker-src': "'self' blob:" });

// One file name, or one folder of pdf.js's data and a file name in it: nothing else is served.
const assetPath = /^\/assets\/(?:(?:cmaps|standard_fonts)\/)?[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** A file as served: its bytes and, when the build wrote one (`<name>.gz`), its gzipped form. */
type Asset = { bytes: Uint8Array; gzipped: Uint8Array | null; etag: string; type: string };

export type ConsoleSite = { handle(request: Request, pathname: string): Promise<Response> | null };

const missing = (error: unknown) => ['ENOENT', 'ENOTDIR', 'ENAMETOOLONG', 'EISDIR'].includes((error as NodeJS.ErrnoException).code ?? '');

/** Whether If-None-Match (a list of tags, weak or strong, or `*`) names this tag. */
function matchesTag(header: string | null, etag: string): boolean {
  if (!header) return false;
  const wanted = etag.replace(/^W\//, '');
  return header.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed.replace(/^W\//, '') === wanted;
  });
}

/**
 * The console's pages and assets, kept in memory once read; a file rebuilt since (its size or
 * modification time changed: `npm run build:console` while the server runs) is read again.
 * Compression is done by the build, never here: the server only picks the gzipped file.
 */
export function consoleSite(directory = defaultDirectory): ConsoleSite {
  const assets = new Map<string, { stamp: string; asset: Promise<Asset> }>();
  const load = async (relative: string): Promise<Asset | null> => {
    const file = path.join(directory, relative);
    let stamp: string;
    try {
      const stats = await stat(file);
      if (!stats.isFile()) return null;
      stamp = `${stats.size}:${stats.mtimeMs}`;
    } catch (error) {
      if (missing(error)) return null;
      throw error;
    }
    const cached = assets.get(relative);
    if (cached?.stamp === stamp) return cached.asset;
    const asset = Promise.all([
      readFile(file),
      readFile(`${file}.gz`).catch((error: unknown) => {
        if (missing(error)) return null;
        throw error;
      }),
    ]).then(([bytes, gzipped]): Asset => ({
      bytes,
      gzipped,
      etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"`,
      type: contentTypes[path.extname(relative)] ?? 'application/octet-stream',
    }));
    assets.set(relative, { stamp, asset });
    asset.catch(() => assets.delete(relative));
    return asset;
  };

  return {
    handle(request, pathname) {
      const page = pathname === '/' || pathname === '/index.html';
      if (!page && !pathname.startsWith('/assets/')) return null;
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        return Promise.resolve(methodNotAllowed(request.method, pathname, ['GET', 'HEAD']));
      }
      if (!page && !assetPath.test(pathname)) return Promise.resolve(errorResponse(noEndpoint(request.method, pathname)));
      return (async () => {
        const relative = page ? 'index.html' : pathname.slice(1);
        const asset = await load(relative);
        if (!asset) {
          if (page) {
            return errorResponse(new AppError('service_unavailable', 'the web console is not built: run npm run build:console (npm install does it)'));
          }
          return errorResponse(noEndpoint(request.method, pathname));
        }
        const gzip = asset.gzipped !== null && new Negotiator({ headers: { 'accept-encoding': request.headers.get('accept-encoding') ?? undefined } }).encoding(['gzip', 'identity']) === 'gzip';
        // The two forms are different bytes, so they are told apart by their tags.
        const etag = gzip ? `${asset.etag.slice(0, -1)}-gz"` : asset.etag;
        // Chunk names carry their content's hash; the others keep their names from build to build.
        const immutable = /\/chunk-[A-Z0-9]+\.js$/.test(pathname);
        const headers: Record<string, string> = {
          'content-type': asset.type,
          etag,
          'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
          vary: 'accept-encoding',
          ...securityHeaders,
        };
        if (matchesTag(request.headers.get('if-none-match'), etag)) return new Response(null, { status: 304, headers });
        if (gzip) headers['content-encoding'] = 'gzip';
        return new Response(new Uint8Array(gzip ? asset.gzipped! : asset.bytes), { headers });
      })();
    },
  };
}
