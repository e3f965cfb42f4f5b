// The web console at / : the files scripts/build-console.mjs wrote to console/dist, served
// by the service itself. The page talks to the service's public REST API only, from the same
// origin, so its policy allows nothing from elsewhere.
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { AppError, noEndpoint } from '../errors.js';
import { errorResponse } from '../rest/handler.js';

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

// pdf.js decodes some images with WebAssembly and draws pages on canvases; the rest is this origin's.
const contentSecurityPolicy = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "worker-src 'self' blob:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const securityHeaders = {
  'content-security-policy': contentSecurityPolicy,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

// One file name, or one folder of pdf.js's data and a file name in it: nothing else is served.
const assetPath = /^\/assets\/(?:(?:cmaps|standard_fonts)\/)?[A-Za-z0-9][A-Za-z0-9._-]*$/;

type Asset = { bytes: Buffer; gzipped: Buffer | null; etag: string; type: string };

export type ConsoleSite = { handle(request: Request, pathname: string): Promise<Response> | null };

/**
 * The console's pages and assets, kept in memory once read; a file rebuilt since (its size or
 * modification time changed: `npm run build:console` while the server runs) is read again.
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
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
      throw error;
    }
    const cached = assets.get(relative);
    if (cached?.stamp === stamp) return cached.asset;
    const asset = readFile(file).then((bytes): Asset => {
      const type = contentTypes[path.extname(relative)] ?? 'application/octet-stream';
      const compressible = /^(text\/|application\/json)/.test(type) && bytes.length > 1024;
      return { bytes, gzipped: compressible ? gzipSync(bytes) : null, etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"`, type };
    });
    assets.set(relative, { stamp, asset });
    return asset;
  };

  return {
    handle(request, pathname) {
      const page = pathname === '/' || pathname === '/index.html';
      if (!page && !pathname.startsWith('/assets/')) return null;
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        const response = errorResponse(new AppError('method_not_allowed', `${request.method} is not allowed on ${pathname}`));
        response.headers.set('allow', 'GET, HEAD');
        return Promise.resolve(response);
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
        // Chunk names carry their content's hash; the others keep their names from build to build.
        const immutable = /\/chunk-[A-Z0-9]+\.js$/.test(pathname);
        const headers: Record<string, string> = {
          'content-type': asset.type,
          etag: asset.etag,
          'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
          vary: 'accept-encoding',
          ...securityHeaders,
        };
        if (request.headers.get('if-none-match') === asset.etag) return new Response(null, { status: 304, headers });
        const gzipped = asset.gzipped && /\bgzip\b/.test(request.headers.get('accept-encoding') ?? '') ? asset.gzipped : null;
        if (gzipped) headers['content-encoding'] = 'gzip';
        return new Response(new Uint8Array(gzipped ?? asset.bytes), { headers });
      })();
    },
  };
}
