import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOwnDatabase, migratedDataDir } from '../../test/support/server.js';
import { loadConfig } from '../config.js';
import { openDatabase, type Database } from '../db/database.js';
import { AppError } from '../errors.js';
import type { Viewer } from './authenticate.js';
import {
  agentRunVisible,
  apiKeyVisible,
  grantFor,
  readSessions,
  requireWorkspaces,
  sameCredential,
  sessionWorkspaces,
  unrestrictedOnly,
  withinRestriction,
} from './policy.js';
import { allScopes, type Scope } from './scopes.js';

// The policy module on its own: the rules as functions, and the conditions it hands services run
// against a real store (PostgreSQL in its matrix leg, in a database of this file's own; else the
// embedded store).
let dataDir: string;
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;
let db: Database;
let userId: string;
let otherUserId: string;
const mine: string[] = [];
let othersWorkspace: string;

const viewer = (workspaceIds: string[] | null, scopes: readonly Scope[] = allScopes, apiKeyId = 'key-1'): Viewer => ({
  userId,
  scopes: new Set(scopes),
  workspaceIds: workspaceIds === null ? null : new Set(workspaceIds),
  credential: { kind: 'api_key', apiKeyId },
});

const refusal = async (work: Promise<unknown>) => {
  try {
    await work;
  } catch (error) {
    if (error instanceof AppError) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a refusal');
};

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-policy-');
  const postgresUrl = (!process.env.ELASTICSEARCH_URL && process.env.DATABASE_URL) || undefined;
  ownDatabase = postgresUrl ? await createOwnDatabase(postgresUrl) : undefined;
  db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: ownDatabase?.url ?? '' }));
  const user = await db.prisma.user.create({ data: { email: `policy-${randomUUID()}@example.com`, name: 'Policy' } });
  const other = await db.prisma.user.create({ data: { email: `policy-${randomUUID()}@example.com`, name: 'Other' } });
  userId = user.id;
  otherUserId = other.id;
  for (const name of ['a', 'b', 'c']) mine.push((await db.prisma.workspace.create({ data: { userId, name, nameKey: name } })).id);
  othersWorkspace = (await db.prisma.workspace.create({ data: { userId: otherUserId, name: 'a', nameKey: 'a' } })).id;
}, 60_000);

afterAll(async () => {
  await db?.close();
  await ownDatabase?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('the restriction of a key', () => {
  it('lets an unrestricted viewer see anything of its own, and a restricted one only what names its workspaces alone', () => {
    const [a, b] = mine;
    expect(withinRestriction(viewer(null), [])).toBe(true);
    expect(withinRestriction(viewer([a!]), [a!])).toBe(true);
    expect(withinRestriction(viewer([a!]), [a!.toUpperCase()])).toBe(true);
    expect(withinRestriction(viewer([a!]), [a!, b!])).toBe(false);
    // Naming no workspace holds none of the key's content: hidden from a restricted key.
    expect(withinRestriction(viewer([a!]), [])).toBe(false);
  });

  it('refuses what only an unrestricted credential may do, and allows it otherwise', () => {
    expect(unrestrictedOnly(viewer(null), 'create a workspace')).toBeNull();
    expect(unrestrictedOnly(null, 'create a workspace')).toBeNull();
    const refused = unrestrictedOnly(viewer([mine[0]!]), 'create a workspace');
    expect(refused?.code).toBe('forbidden');
    expect(refused?.message).toMatch(/restricted to workspaces and cannot create a workspace/);
  });
});

describe('workspaces', () => {
  it("finds the viewer's workspaces once each, in order, and answers 404 for the first it may not see", async () => {
    const [a, b, c] = mine;
    expect(await requireWorkspaces(db.prisma, viewer(null), [b!, a!.toUpperCase(), b!])).toEqual([b, a]);
    expect(await refusal(requireWorkspaces(db.prisma, viewer(null), [a!, othersWorkspace]))).toEqual({ code: 'not_found', message: `workspace ${othersWorkspace} not found` });
    expect((await refusal(requireWorkspaces(db.prisma, viewer([a!]), [a!, c!]))).message).toBe(`workspace ${c} not found`);
    expect((await refusal(requireWorkspaces(db.prisma, viewer(null), ['not-a-uuid']))).code).toBe('not_found');
  });

  it('makes a restricted key name workspaces for a session, and only its own', async () => {
    expect(await sessionWorkspaces(db.prisma, viewer(null), [])).toEqual([]);
    expect((await refusal(sessionWorkspaces(db.prisma, viewer([mine[0]!]), []))).code).toBe('forbidden');
    expect((await refusal(sessionWorkspaces(db.prisma, viewer([mine[0]!]), [mine[1]!]))).code).toBe('not_found');
  });
});

describe('chat sessions', () => {
  it('shows a restricted key only the sessions whose every workspace is its own', async () => {
    const [a, b] = mine;
    await db.prisma.chatSession.createMany({
      data: [
        { userId, title: 'a', workspaceIds: [a!] },
        { userId, title: 'a and b', workspaceIds: [a!, b!] },
        { userId, title: 'none', workspaceIds: [] },
        { userId: otherUserId, title: 'other', workspaceIds: [othersWorkspace] },
      ],
    });
    const titles = (access: Viewer) => readSessions(db.prisma, access, async (store, where) => (await store.chatSession.findMany({ where, select: { title: true }, orderBy: { title: 'asc' } })).map((row) => row.title));
    expect(await titles(viewer(null))).toEqual(['a', 'a and b', 'none']);
    expect(await titles(viewer([a!]))).toEqual(['a']);
    expect(await titles(viewer([a!, b!]))).toEqual(['a', 'a and b']);
  });
});

describe('agent runs', () => {
  it("shows a run to its user, and to a restricted key only when it searched the key's workspaces and its session is visible too", async () => {
    const [a, b] = mine;
    const sessionOf: Record<string, string[] | null> = { sessionA: [a!], sessionAB: [a!, b!], gone: null };
    const asked: string[] = [];
    const sessionWorkspacesOf = async (id: string) => {
      asked.push(id);
      return sessionOf[id] ?? null;
    };
    const run = (workspaceIds: string[] | null, sessionId: string | null, owner = userId) => ({ userId: owner, workspaceIds, sessionId });
    expect(await agentRunVisible(viewer(null), run([a!, b!], 'sessionAB'), sessionWorkspacesOf)).toBe(true);
    // An unrestricted viewer is not asked about the session at all.
    expect(asked).toEqual([]);
    expect(await agentRunVisible(viewer(null), run([a!], null, otherUserId), sessionWorkspacesOf)).toBe(false);
    expect(await agentRunVisible(viewer([a!]), run([a!], null), sessionWorkspacesOf)).toBe(true);
    expect(await agentRunVisible(viewer([a!]), run([a!, b!], null), sessionWorkspacesOf)).toBe(false);
    expect(await agentRunVisible(viewer([a!]), run(null, null), sessionWorkspacesOf)).toBe(false);
    expect(await agentRunVisible(viewer([a!]), run([a!], 'sessionA'), sessionWorkspacesOf)).toBe(true);
    // Searched a only, but continued a conversation that drew on b as well.
    expect(await agentRunVisible(viewer([a!]), run([a!], 'sessionAB'), sessionWorkspacesOf)).toBe(false);
    // The session was deleted since: the run's own workspaces decide.
    expect(await agentRunVisible(viewer([a!]), run([a!], 'gone'), sessionWorkspacesOf)).toBe(true);
  });
});

describe('API keys', () => {
  it('shows a key to an unrestricted caller of its user, and to a restricted one only when the key is restricted within it', () => {
    const [a, b] = mine;
    const key = (workspaceIds: string[] | null, owner = userId) => ({ userId: owner, workspaceRestricted: workspaceIds !== null, workspaceIds: workspaceIds ?? [] });
    expect(apiKeyVisible(viewer(null), key(null))).toBe(true);
    expect(apiKeyVisible(viewer(null), key(null, otherUserId))).toBe(false);
    expect(apiKeyVisible(viewer([a!, b!]), key([a!]))).toBe(true);
    expect(apiKeyVisible(viewer([a!]), key([a!, b!]))).toBe(false);
    expect(apiKeyVisible(viewer([a!]), key(null))).toBe(false);
  });

  it('grants a new key no scope and no workspace its maker lacks', async () => {
    const [a, b] = mine;
    expect(await grantFor(db.prisma, viewer(null), { scopes: ['kb:read', 'user:read'], workspaceIds: undefined })).toEqual({ scopes: ['user:read', 'kb:read'], workspaceIds: null });
    const narrow = viewer([a!], ['kb:read']);
    expect(await refusal(grantFor(db.prisma, narrow, { scopes: ['kb:write'], workspaceIds: [a!] }))).toMatchObject({ code: 'forbidden', message: expect.stringContaining('kb:write') });
    expect((await refusal(grantFor(db.prisma, narrow, { scopes: ['kb:read'], workspaceIds: null }))).code).toBe('forbidden');
    expect((await refusal(grantFor(db.prisma, narrow, { scopes: ['kb:read'], workspaceIds: [b!] }))).code).toBe('not_found');
    expect((await refusal(grantFor(db.prisma, viewer(null), { scopes: ['kb:read'], workspaceIds: [] }))).code).toBe('bad_request');
    expect(await grantFor(db.prisma, narrow, { scopes: ['kb:read'], workspaceIds: [a!.toUpperCase(), a!] })).toEqual({ scopes: ['kb:read'], workspaceIds: [a] });
  });
});

describe('credentials', () => {
  it('takes two requests for the same credential only with the same key, scopes and workspaces', () => {
    const [a] = mine;
    expect(sameCredential(viewer(null), viewer(null))).toBe(true);
    expect(sameCredential(viewer(null), viewer(null, allScopes, 'key-2'))).toBe(false);
    expect(sameCredential(viewer(null), viewer(null, ['kb:read']))).toBe(false);
    expect(sameCredential(viewer(null), viewer([a!]))).toBe(false);
    const jwt = (scopes: readonly Scope[]): Viewer => ({ userId, scopes: new Set(scopes), workspaceIds: null, credential: { kind: 'jwt' } });
    expect(sameCredential(jwt(allScopes), jwt(allScopes))).toBe(true);
    expect(sameCredential(jwt(allScopes), viewer(null))).toBe(false);
  });
});
