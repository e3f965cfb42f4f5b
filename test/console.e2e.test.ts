// The web console end to end: Debian's Chromium, driven by playwright-core, against a real
// server (the real store, parser, embedding model and agent) on a free port. The steps build
// on each other as a newcomer's first session would: sign in with the key, create a workspace,
// upload a PDF, search it, ask about it, open a citation at its page, manage keys, run out of
// credits. Each main screen is photographed (npm run screenshots writes them to docs/images).
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserExecutable } from './support/browser.js';
import { benchPdfDirectory, makeBlankPdf, waitForDocuments } from './support/documents.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';

const screenshotDirectory = path.resolve(import.meta.dirname, '..', process.env.KB_SCREENSHOT_DIR ?? 'tmp/console-screenshots');
const laptop = { width: 1280, height: 800 };
const phone = { width: 390, height: 844 };

let server: TestServer;
let user: TestUser;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const pageErrors: string[] = [];
const deepCost = 5;

const shoot = async (name: string, target: Page = page) => {
  await target.screenshot({ path: path.join(screenshotDirectory, `console-${name}.png`) });
};

/** No part of the page is wider than the window: nothing needs sideways scrolling. */
const overflowsSideways = (target: Page) => target.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);

beforeAll(async () => {
  await mkdir(screenshotDirectory, { recursive: true });
  server = await startTestServer();
  // Enough for one deep answer, not for two: the second is refused with 402.
  user = await server.createUser({ credits: deepCost + 1 });
  browser = await chromium.launch({ executablePath: browserExecutable()!, args: ['--no-sandbox'] });
  context = await browser.newContext({ viewport: laptop });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
  page = await context.newPage();
  page.on('pageerror', (error) => pageErrors.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    // A refused request is logged by the browser itself; the console shows it in words (tested below).
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) pageErrors.push(message.text());
  });
  // Every file the console loads is there (a missing pdf.js font or character map would be logged only as a failed load).
  page.on('response', (response) => {
    if (new URL(response.url()).pathname.startsWith('/assets/') && response.status() >= 400) pageErrors.push(`${response.status()} for ${response.url()}`);
  });
  // Everything the console loads comes from the service itself.
  page.on('request', (request) => {
    if (!request.url().startsWith(server.url) && !request.url().startsWith('blob:') && !request.url().startsWith('data:')) pageErrors.push(`request to another origin: ${request.url()}`);
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('the web console', () => {
  let workspaceName: string;
  let workspaceId: string;

  it('is served at / with a policy that allows nothing from elsewhere', async () => {
    const response = await fetch(`${server.url}/`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(response.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await response.text();
    expect(html).not.toMatch(/https?:\/\//);
    expect((await fetch(`${server.url}/assets/..%2Fpackage.json`)).status).toBe(404);
    expect((await fetch(`${server.url}/`, { method: 'POST' })).status).toBe(405);
  });

  it('signs in with a pasted key, kept for the tab only, and shows the name and balance', async () => {
    await page.goto(`${server.url}/`);
    await shoot('sign-in');
    await page.getByLabel('API key').fill('sk_not-a-real-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').innerText()).toContain('The key was not accepted');

    await page.getByLabel('API key').fill(user.key);
    await page.getByLabel('API key').press('Enter');
    await page.getByRole('heading', { name: 'Workspaces' }).waitFor();
    await expect.poll(() => page.locator('header .account').innerText()).toContain('Test User');
    expect(await page.getByTestId('credit-balance').innerText()).toBe(`${deepCost + 1} credits`);
    expect(await page.evaluate(() => [sessionStorage.length, localStorage.length])).toEqual([1, 0]);

    // A new tab of the same browser is not signed in.
    const other = await context.newPage();
    await other.goto(`${server.url}/`);
    await other.getByLabel('API key').waitFor();
    await other.close();
  });

  it('creates a workspace and renames it', async () => {
    workspaceName = 'Wiki papers';
    await page.getByLabel('New workspace').fill('Wiki drafts');
    await page.getByRole('button', { name: 'Create workspace' }).click();
    await page.getByRole('heading', { name: 'Wiki drafts' }).waitFor();
    workspaceId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]!);
    await page.getByRole('button', { name: 'Rename' }).click();
    await page.getByRole('dialog').getByLabel('Name').fill(workspaceName);
    await page.getByRole('dialog').getByRole('button', { name: 'Rename' }).click();
    await page.getByRole('heading', { name: workspaceName }).waitFor();
    const listed = await server.request('GET', '/v1/kb/workspaces', { key: user.key });
    expect(listed.body.map((workspace: { name: string }) => workspace.name)).toEqual([workspaceName]);
  });

  it('uploads several files with progress, shows each one processed to ready, and a failed one with its reason and a retry', async () => {
    // A PDF of a blank page: no text layer, and nothing for OCR to read.
    await page.getByTestId('file-input').setInputFiles([
      { name: 'sample_pdf_2.pdf', mimeType: 'application/pdf', buffer: await readFile(path.join(benchPdfDirectory, 'sample_pdf_2.pdf')) },
      { name: 'blank-scan.pdf', mimeType: 'application/pdf', buffer: Buffer.from(makeBlankPdf()) },
    ]);
    await page.getByRole('list', { name: 'Uploads' }).waitFor();
    expect(await page.getByRole('progressbar', { name: 'Uploading sample_pdf_2.pdf' }).count()).toBe(1);

    const ready = page.locator('tr[data-testid="document-row"]', { hasText: 'sample_pdf_2.pdf' });
    await ready.and(page.locator('[data-status="ready"]')).waitFor({ timeout: 120_000 });
    expect(await ready.innerText()).toMatch(/Ready\s+4\s+3/); // 4 pages, 3 chunks

    const failed = page.locator('tr[data-testid="document-row"]', { hasText: 'blank-scan.pdf' });
    await failed.and(page.locator('[data-status="failed"]')).waitFor({ timeout: 120_000 });
    expect(await failed.innerText()).toMatch(/no text/i);
    await shoot('documents');

    // Every status the row shows from here on.
    await failed.evaluate((row) => {
      const seen: string[] = [];
      (window as unknown as { retrySeen: string[] }).retrySeen = seen;
      new MutationObserver(() => {
        const status = row.getAttribute('data-status')!;
        if (seen.at(-1) !== status) seen.push(status);
      }).observe(row, { attributes: true, attributeFilter: ['data-status'] });
    });
    const retried = page.waitForResponse((response) => response.url().includes('/retry'));
    await failed.getByRole('button', { name: 'Retry' }).click();
    const answer = await retried;
    expect(answer.status()).toBe(202);
    const retriedDocument = (await answer.json()) as { id: string; status: string };
    expect(retriedDocument.status).toBe('queued');
    // Processed again from its kept bytes, it fails again for the same reason, and the list says so.
    await waitForDocuments(server, user.key, [retriedDocument.id]);
    await expect.poll(() => page.evaluate(() => (window as unknown as { retrySeen: string[] }).retrySeen), { timeout: 10_000 }).toEqual(
      expect.arrayContaining(['queued', 'failed']),
    );
    const seen = await page.evaluate(() => (window as unknown as { retrySeen: string[] }).retrySeen);
    expect(seen[0]).toBe('queued');
    expect(seen.at(-1)).toBe('failed');
    expect(await failed.innerText()).toMatch(/Failed[\s\S]*no text/i);
  });

  it('takes files dropped on the page', async () => {
    // A drop as the browser delivers it: a DataTransfer holding two files.
    const dropped = await page.evaluateHandle(() => {
      const transfer = new DataTransfer();
      transfer.items.add(new File(['# Ward Cunningham\n\nHe built WikiWikiWeb in 1995.'], 'notes.md', { type: 'text/markdown' }));
      transfer.items.add(new File(['Wikis grew out of the Portland Pattern Repository.'], 'history.txt', { type: 'text/plain' }));
      return transfer;
    });
    await page.locator('.dropzone').dispatchEvent('dragover', { dataTransfer: dropped });
    expect(await page.locator('.dropzone').getAttribute('class')).toContain('dragging');
    await page.locator('.dropzone').dispatchEvent('drop', { dataTransfer: dropped });
    for (const name of ['notes.md', 'history.txt']) {
      await page.locator('tr[data-testid="document-row"][data-status="ready"]', { hasText: name }).waitFor({ timeout: 60_000 });
    }
    // They are the workspace's documents now; the next steps count on the PDF's, so they go again.
    for (const name of ['notes.md', 'history.txt']) {
      page.once('dialog', (dialog) => void dialog.accept());
      await page.getByRole('button', { name: `Delete ${name}` }).click();
      await page.locator('tr[data-testid="document-row"]', { hasText: name }).waitFor({ state: 'detached' });
    }
  });

  it('shows a document’s chunks with their pages, and grep with the matches highlighted', async () => {
    await page.getByRole('link', { name: 'sample_pdf_2.pdf' }).click();
    await page.getByRole('heading', { name: 'sample_pdf_2.pdf' }).waitFor();
    await page.locator('.chunk').first().waitFor();
    expect(await page.locator('.chunk').count()).toBe(3);
    expect(await page.locator('.chunk .page').allInnerTexts()).toEqual(['pages 1–3', 'page 3', 'pages 3–4']);

    await page.getByRole('tab', { name: 'Find in document' }).click();
    await page.getByLabel('Pattern').fill('Cunningham');
    await page.getByRole('button', { name: 'Find', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'match' }).waitFor();
    const marks = await page.locator('.chunk mark').allInnerTexts();
    expect(marks.length).toBeGreaterThan(0);
    expect(new Set(marks)).toEqual(new Set(['Cunningham']));
  });

  it('searches in the playground and shows scores, pages and the chunk text', async () => {
    await page.getByRole('link', { name: 'Search', exact: true }).first().click();
    await page.getByRole('heading', { name: 'Search' }).waitFor();
    await page.getByLabel('Query').fill('Who invented the wiki?');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    const results = page.getByTestId('search-result');
    await results.first().waitFor();
    const first = await results.first().innerText();
    expect(first).toMatch(/^\d\.\d{3}/); // the score
    expect(first).toContain('sample_pdf_2.pdf');
    expect(first).toMatch(/page \d/);
    expect(await results.allInnerTexts()).toContainEqual(expect.stringContaining('Ward Cunningham'));
    await shoot('search');
  });

  it('asks in deep mode: the reasoning steps and the answer stream in, with the credits it cost and citations', async () => {
    await page.getByRole('link', { name: 'Chat' }).click();
    await page.getByRole('heading', { name: 'New chat' }).waitFor();
    await page.getByLabel(workspaceName).check();
    await page.getByRole('radio', { name: /Deep/ }).check();
    // Records the answer's length at every change the page shows: a streamed answer grows in many steps.
    await page.evaluate(() => {
      const lengths: number[] = [];
      (window as unknown as { answerLengths: number[] }).answerLengths = lengths;
      new MutationObserver(() => {
        const text = document.querySelector('[data-testid="live-answer"] .answer-text')?.textContent ?? '';
        if (text.length > 0 && text.length !== lengths[lengths.length - 1]) lengths.push(text.length);
      }).observe(document.querySelector('.conversation')!, { childList: true, subtree: true, characterData: true });
    });
    await page.getByLabel('Question').fill('Who invented the wiki?');
    const streamed = page.waitForResponse((response) => new URL(response.url()).pathname === '/agent/stream');
    await page.getByLabel('Question').press('Enter');

    const answer = page.locator('.message.assistant').last();
    await answer.getByTestId('answer-credits').waitFor({ timeout: 60_000 });
    const lengths = await page.evaluate(() => (window as unknown as { answerLengths: number[] }).answerLengths);
    expect(lengths.length, `answer lengths seen: ${lengths.join(', ')}`).toBeGreaterThan(3);
    expect([...lengths].sort((a, b) => a - b)).toEqual(lengths);
    const wire = await (await streamed).text();
    expect(wire.match(/"type":"token"/g)?.length ?? 0).toBeGreaterThan(3);
    expect(wire).toContain('"type":"reasoning"');

    expect(await answer.locator('.sources').innerText()).toContain('sample_pdf_2.pdf, page');
    expect(await answer.getByTestId('answer-credits').innerText()).toContain(`deep answer · ${deepCost} credits`);
    expect(await answer.getByTestId('reasoning-step').count()).toBeGreaterThan(0);
    await expect.poll(() => page.getByTestId('credit-balance').innerText()).toBe('1 credit');
    expect(new URL(page.url()).hash).toMatch(/^#\/chat\/[0-9a-f-]{36}$/);
    await answer.locator('details.steps').evaluate((element) => ((element as HTMLDetailsElement).open = true));
    await page.locator('.conversation').evaluate((element) => element.scrollTo(0, 0));
    await shoot('chat');
  });

  it('opens a citation at its page: the PDF page rendered with the quote marked, and the passage highlighted', async () => {
    const citation = page.locator('.message.assistant').last().getByTestId('citation').first();
    const target = new URLSearchParams((await citation.getAttribute('href'))!.split('?')[1]);
    const citedPage = target.get('page')!;
    expect(citedPage).toMatch(/^[1-4]$/);
    const answer = await server.request('GET', `/v1/chat/sessions/${new URL(page.url()).hash.split('/')[2]}`, { key: user.key });
    type Passage = { chunk_index: number; start: number; quote: string };
    const stored = answer.body.messages
      .at(-1)
      .sources.flatMap((source: { passages: Passage[] }) => source.passages)
      .find((passage: Passage) => passage.chunk_index === Number(target.get('chunk')) && passage.start === Number(target.get('start'))) as Passage;
    await citation.click();
    await page.getByRole('tab', { name: 'Cited passage' }).waitFor();
    const rendered = page.getByTestId('pdf-page');
    await rendered.and(page.locator('[data-quote-found]')).waitFor({ timeout: 30_000 });
    expect(await rendered.getAttribute('data-quote-found')).toBe('true');
    // The citation names the page its chunk starts on; a quote further into the chunk is shown on the page it stands on.
    const documentId = new URL(page.url()).hash.split('?')[0]!.split('/')[4]!;
    const chunks = await server.request('GET', `/v1/kb/documents/${documentId}/chunks?workspace_id=${workspaceId}`, { key: user.key });
    const chunkPages: number[] = chunks.body.find((chunk: { chunk_index: number }) => chunk.chunk_index === Number(target.get('chunk'))).metadata.pages;
    const shown = Number(await rendered.getAttribute('data-page'));
    expect(shown).toBeGreaterThanOrEqual(Number(citedPage));
    expect(chunkPages).toContain(shown);
    expect(await page.locator('.pdf-controls').innerText()).toContain(`Page ${shown} of 4`);
    expect(await rendered.locator('canvas').count()).toBe(1);
    expect(await rendered.locator('.textLayer .cited').count()).toBeGreaterThan(0);
    // The words marked on the rendered page are the quote's.
    const marked = (await rendered.locator('.textLayer .cited').allTextContents()).join(' ');
    const words = (text: string) => text.toLowerCase().match(/[a-z]{4,}/g) ?? [];
    expect(words(marked), marked).toEqual(expect.arrayContaining(words(stored.quote).slice(0, 3)));
    expect(await page.getByTestId('cited-chunk').locator('mark').innerText()).toBe(stored.quote);
    await shoot('citation');

    // A link under another workspace (a chat over several cites under its first) moves to the document's own.
    const [hashPath, hashQuery] = new URL(page.url()).hash.split('?');
    const elsewhere = `${hashPath!.replace(workspaceId, '00000000-0000-4000-8000-000000000000')}?${hashQuery}`;
    await page.goto(`${server.url}/${elsewhere}`);
    await expect.poll(() => new URL(page.url()).hash).toBe(`${hashPath}?${hashQuery}`);
    await rendered.and(page.locator('[data-quote-found="true"]')).waitFor({ timeout: 30_000 });
  });

  it('creates a key with scopes, shows the raw key once with a copy button, and revokes it', async () => {
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'API keys', exact: true }).waitFor();
    await page.getByLabel('Name').fill('read-only importer');
    await page.getByLabel('chat:write').uncheck();
    await page.getByLabel(workspaceName).check();
    await page.getByRole('button', { name: 'Create key' }).click();
    const raw = await page.getByTestId('raw-key').innerText();
    expect(raw).toMatch(/^sk_/);
    await page.getByRole('button', { name: 'Copy key' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(raw);
    await shoot('new-key');
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await page.getByTestId('raw-key').waitFor({ state: 'detached' });

    const me = await server.request('GET', `/v1/kb/workspaces/${workspaceId}/documents`, { key: raw });
    expect(me.status).toBe(200);
    const row = page.getByTestId('api-key-row').filter({ hasText: 'read-only importer' });
    expect(await row.innerText()).toContain('kb:read');
    expect(await row.innerText()).toContain(workspaceName);
    await row.getByRole('button', { name: 'Revoke read-only importer' }).click();
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await row.waitFor({ state: 'detached' });
    expect((await server.request('GET', '/v1/user/me', { key: raw })).status).toBe(401);
  });

  it('explains a 402 in words when the credits run out, and charges nothing', async () => {
    await page.getByRole('link', { name: 'Chat' }).click();
    await page.locator('.sessions li a').first().click();
    await page.locator('.message.assistant').first().waitFor();
    await page.getByRole('radio', { name: /Deep/ }).check();
    await page.getByLabel('Question').fill('When was the first wiki created?');
    await page.getByRole('button', { name: 'Ask' }).click();
    const alert = page.getByTestId('live-answer').getByRole('alert');
    await alert.waitFor();
    const said = await alert.innerText();
    expect(said).toContain('Not enough credits');
    expect(said).toMatch(/credits/);
    expect(said).toContain('kb credits grant');
    expect(await page.getByTestId('credit-balance').innerText()).toBe('1 credit');
    await shoot('out-of-credits');
  });

  it('names what a workspace deletion loses before deleting anything', async () => {
    await page.getByRole('link', { name: 'Workspaces' }).click();
    await page.getByRole('button', { name: `Delete ${workspaceName}` }).click();
    const consequence = page.getByTestId('delete-consequence');
    await consequence.waitFor();
    expect(await consequence.innerText()).toMatch(/Wiki papers with its 2 documents \(.+\) and their 3 indexed chunks/);
    await page.keyboard.press('Escape');
    await consequence.waitFor({ state: 'detached' });
    expect((await server.request('GET', `/v1/kb/workspaces/${workspaceId}`, { key: user.key })).status).toBe(200);
  });

  it('can be used with the keyboard alone', async () => {
    await page.goto(`${server.url}/#/workspaces`);
    await page.reload();
    await page.getByRole('heading', { name: 'Workspaces' }).waitFor();
    const focused = () => page.evaluate(() => document.activeElement?.textContent?.trim());
    await page.keyboard.press('Tab');
    expect(await focused()).toBe('Skip to content');
    // Through the menu to Chat, and into it with Enter.
    for (let presses = 0; presses < 10 && (await focused()) !== 'Chat'; presses++) await page.keyboard.press('Tab');
    expect(await focused()).toBe('Chat');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'New chat' }).waitFor();
    // A question typed and sent with Enter alone is answered (fast: the last credit).
    for (let presses = 0; presses < 20 && (await page.evaluate(() => document.activeElement?.id)) !== 'question'; presses++) await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('question');
    await page.keyboard.type('What is a wiki?');
    await page.keyboard.press('Enter');
    await page.locator('.message.assistant').getByTestId('answer-credits').waitFor({ timeout: 60_000 });
    expect(await page.locator('.message.assistant').getByTestId('answer-credits').innerText()).toContain('fast answer · 1 credit');
    await expect.poll(() => page.getByTestId('credit-balance').innerText()).toBe('0 credits');

    // The document's views are tabs: the arrow keys move between them.
    await page.locator('.sources a').first().click();
    await page.getByRole('tab', { name: 'Cited passage' }).focus();
    await page.keyboard.press('ArrowRight');
    expect(await page.getByRole('tab', { name: 'Chunks' }).getAttribute('aria-selected')).toBe('true');
    await page.keyboard.press('End');
    expect(await page.getByRole('tab', { name: 'Find in document' }).getAttribute('aria-selected')).toBe('true');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Find in document');
  });

  it('shows the page asked for when pages are turned quickly, drawn once', async () => {
    await page.getByRole('tab', { name: 'Cited passage' }).click();
    const rendered = page.getByTestId('pdf-page');
    await rendered.and(page.locator('[data-quote-found]')).waitFor({ timeout: 30_000 });
    const start = Number(await rendered.getAttribute('data-page'));
    const forward = start < 3 ? 'Next page' : 'Previous page';
    await page.getByRole('button', { name: forward }).click();
    await page.getByRole('button', { name: forward }).click();
    const expected = start < 3 ? start + 2 : start - 2;
    await expect.poll(() => page.locator('.pdf-controls span').innerText()).toBe(`Page ${expected} of 4`);
    await expect.poll(() => rendered.locator('canvas').getAttribute('aria-label')).toBe(`Page ${expected}`);
    await page.waitForTimeout(500); // a late render of a page turned past would land here
    expect(await rendered.locator('canvas').count()).toBe(1);
    expect(await rendered.locator('.textLayer').count()).toBe(1);
    expect(await rendered.locator('canvas').getAttribute('aria-label')).toBe(`Page ${expected}`);
  });

  it('says in words that a session is gone, and shows nothing of another one', async () => {
    await page.goto(`${server.url}/#/chat/00000000-0000-4000-8000-000000000000`);
    await page.reload();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.innerText()).toContain('Not found');
    expect(await page.locator('.conversation .message').count()).toBe(0);
  });

  it('holds its layout at a phone’s width', async () => {
    await page.setViewportSize(phone);
    const screens: [string, string][] = [
      [`#/workspaces/${workspaceId}`, '[data-testid="document-row"]'],
      ['#/search', 'select option'],
      ['#/chat', '.sessions li a'],
      ['#/keys', '[data-testid="api-key-row"]'],
    ];
    for (const [target, content] of screens) {
      await page.goto(`${server.url}/${target}`);
      await page.reload();
      await page.locator(content).first().waitFor({ state: 'attached' });
      expect(await overflowsSideways(page), target).toBe(false);
    }
    // A citation: the rendered page and the passage stacked.
    await page.goto(`${server.url}/#/chat`);
    await page.locator('.sessions li a').last().click();
    await page.getByTestId('citation').first().click();
    await page.getByTestId('pdf-page').and(page.locator('[data-quote-found]')).waitFor({ timeout: 30_000 });
    expect(await overflowsSideways(page), 'citation').toBe(false);
    await shoot('phone-citation');
    // A dialog.
    await page.goto(`${server.url}/#/workspaces`);
    await page.getByRole('button', { name: `Delete ${workspaceName}` }).click();
    await page.getByTestId('delete-consequence').waitFor();
    expect(await overflowsSideways(page), 'dialog').toBe(false);
    await page.keyboard.press('Escape');
    await page.goto(`${server.url}/#/chat`);
    await page.locator('.sessions li a').first().click();
    await page.locator('.message.assistant').first().waitFor();
    await shoot('phone-chat');
    await page.setViewportSize(laptop);
  }, 60_000);

  it('logged no error in the browser and loaded nothing from elsewhere', () => {
    expect(pageErrors).toEqual([]);
  });
});

describe('GraphiQL at /graphql', () => {
  it('loads from this server alone, under its policy, and runs a query with the key in its headers', async () => {
    const graphiqlContext = await browser.newContext({ viewport: laptop });
    const graphiql = await graphiqlContext.newPage();
    const problems: string[] = [];
    graphiql.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    // The schema is fetched before the key is given: that 401 is the browser's own log line.
    graphiql.on('console', (message) => {
      if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(message.text());
    });
    // As offline: anything asked of another origin fails, and is noted.
    await graphiql.route(
      (url) => !url.href.startsWith(server.url) && url.protocol !== 'data:' && url.protocol !== 'blob:',
      (route) => {
        problems.push(`request to another origin: ${route.request().url()}`);
        return route.abort();
      },
    );
    await graphiql.goto(`${server.url}/graphql`);
    await graphiql.locator('.graphiql-query-editor .monaco-editor').waitFor();
    await graphiql.getByText('Headers', { exact: true }).click();
    await graphiql.locator('.graphiql-editor-tool .graphiql-editor:not(.hidden) .monaco-editor').click();
    await graphiql.keyboard.type(`{"Authorization": "Bearer ${user.key}"`);
    await graphiql.locator('.graphiql-query-editor .monaco-editor').click();
    await graphiql.keyboard.press('Control+A');
    await graphiql.keyboard.press('Delete');
    await graphiql.keyboard.type('{ me { email ');
    await graphiql.keyboard.press('Control+Enter');
    await expect.poll(() => graphiql.locator('.result-window').innerText(), { timeout: 15_000 }).toContain(user.email.slice(0, 20));
    expect(problems).toEqual([]);
    await graphiqlContext.close();
  }, 60_000);
});
