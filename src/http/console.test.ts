import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleSite } from './console.js';

let directory: string;
const script = `console.log(${JSON.stringify('x'.repeat(5000))});\n`;

beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), 'kb-console-'));
  await mkdir(path.join(directory, 'assets/cmaps'), { recursive: true });
  await writeFile(path.join(directory, 'index.html'), '<!doctype html><title>console</title>');
  await writeFile(path.join(directory, 'assets/app.js'), script);
  await writeFile(path.join(directory, 'assets/app.js.gz'), gzipSync(script));
  await writeFile(path.join(directory, 'assets/cmaps/UniJIS-UCS2-H.bcmap'), Buffer.from([1, 2, 3]));
  await writeFile(path.join(directory, 'secret.txt'), 'not served');
});

afterAll(() => rm(directory, { recursive: true, force: true }));

const get = (pathname: string, init: RequestInit = {}, site = consoleSite(directory)) =>
  site.handle(new Request(`http://localhost${pathname}`, init), new URL(`http://localhost${pathname}`).pathname);

describe('the console site', () => {
  it('serves the page at / and /index.html with a policy that allows only this origin', async () => {
    for (const pathname of ['/', '/index.html']) {
      const response = (await get(pathname))!;
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(response.headers.get('content-security-policy')).toMatch(/^default-src 'self';.*frame-ancestors 'none'/);
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('cache-control')).toBe('no-cache');
      expect(await response.text()).toContain('<title>console</title>');
    }
  });

  it('leaves every other path to the API', () => {
    for (const pathname of ['/v1/user/me', '/docs', '/graphql', '/asset/app.js', '/indexhtml']) expect(get(pathname)).toBeNull();
  });

  it('answers 304 to a matching If-None-Match, and sends the built gzip file when the client takes it', async () => {
    const first = (await get('/assets/app.js'))!;
    const etag = first.headers.get('etag')!;
    expect(first.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(first.headers.get('content-encoding')).toBeNull();
    expect(first.headers.get('vary')).toBe('accept-encoding');
    expect(await first.text()).toBe(script);
    for (const tags of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      expect((await get('/assets/app.js', { headers: { 'if-none-match': tags } }))!.status, tags).toBe(304);
    }
    expect((await get('/assets/app.js', { headers: { 'if-none-match': '"other"' } }))!.status).toBe(200);

    const gzipped = (await get('/assets/app.js', { headers: { 'accept-encoding': 'gzip, br' } }))!;
    expect(gzipped.headers.get('content-encoding')).toBe('gzip');
    expect(gzipped.headers.get('etag')).toBe(`${etag.slice(0, -1)}-gz"`);
    const bytes = Buffer.from(await gzipped.arrayBuffer());
    expect(bytes.length).toBeLessThan(script.length / 10);
    expect(gunzipSync(bytes).toString()).toBe(script);
    // The plain file's tag does not validate the gzipped one.
    expect((await get('/assets/app.js', { headers: { 'accept-encoding': 'gzip', 'if-none-match': etag } }))!.status).toBe(200);
    for (const refusing of ['gzip;q=0', 'gzip;q=0, identity', 'br', 'identity']) {
      expect((await get('/assets/app.js', { headers: { 'accept-encoding': refusing } }))!.headers.get('content-encoding'), refusing).toBeNull();
    }
    // A file the build did not compress is sent as it is.
    expect((await get('/index.html', { headers: { 'accept-encoding': 'gzip' } }))!.headers.get('content-encoding')).toBeNull();
  });

  it('serves pdf.js data one folder down, and nothing outside the assets', async () => {
    expect((await get('/assets/cmaps/UniJIS-UCS2-H.bcmap'))!.status).toBe(200);
    for (const pathname of ['/assets/../secret.txt', '/assets/..%2Fsecret.txt', '/assets/%2e%2e/secret.txt', '/assets/.hidden', '/assets/cmaps/../../secret.txt', '/assets/other/x.js', '/assets/', '/assets/nothing.js', `/assets/${'a'.repeat(300)}.js`, `/assets/${'a'.repeat(128)}`]) {
      // A `..` the URL parser resolves leaves /assets, and the path is the API's to refuse.
      const response = await get(pathname);
      if (response === null) {
        expect(new URL(`http://localhost${pathname}`).pathname.startsWith('/assets/'), pathname).toBe(false);
        continue;
      }
      expect(response.status, pathname).toBe(404);
      expect(await response.json()).toMatchObject({ error: 'not_found' });
    }
  });

  it('answers 405 with Allow to other methods', async () => {
    const response = (await get('/', { method: 'POST', body: 'x' }))!;
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, HEAD');
  });

  it('serves a file rebuilt while it runs, and says how to build a console that is missing', async () => {
    const site = consoleSite(directory);
    expect(await (await get('/assets/app.js', {}, site))!.text()).toBe(script);
    await writeFile(path.join(directory, 'assets/app.js'), 'console.log("rebuilt");\n');
    expect(await (await get('/assets/app.js', {}, site))!.text()).toBe('console.log("rebuilt");\n');

    const missing = consoleSite(path.join(directory, 'not-built'));
    const page = (await get('/', {}, missing))!;
    expect(page.status).toBe(503);
    expect((await page.json()).message).toContain('npm run build:console');
    expect((await get('/assets/app.js', {}, missing))!.status).toBe(404);
  });
});
