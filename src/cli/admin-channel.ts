import { chmod, unlink } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import path from 'node:path';
import { AppError, isErrorCode } from '../errors.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import { adminCommands, isAdminCommandName, type AdminCommandName } from './admin-commands.js';

/**
 * The embedded store can be open in one process only, so while a server holds it the `kb`
 * account commands are sent to that server over a Unix socket in the data directory. Only
 * users who can open the data directory can reach the socket (mode 0600).
 */
export const adminSocketPath = (dataDir: string) => path.join(dataDir, 'admin.sock');

export async function startAdminChannel(prisma: PrismaClient, socketPath: string): Promise<Server> {
  await unlink(socketPath).catch(() => {});
  const server = createServer(async (request, response) => {
    const name = decodeURIComponent(request.url?.slice(1) ?? '');
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const reply = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (request.method !== 'POST' || !isAdminCommandName(name)) return reply(404, { error: 'not_found', message: `no command ${name}` });
    try {
      const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      reply(200, await adminCommands[name](prisma, input));
    } catch (error) {
      if (error instanceof AppError) return reply(error.status, error.toBody());
      reply(500, { error: 'internal_error', message: (error as Error).message });
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  await chmod(socketPath, 0o600);
  return server;
}

export class AdminChannelUnavailable extends Error {}

export function callAdminChannel(socketPath: string, name: AdminCommandName, input: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ socketPath, path: `/${name}`, method: 'POST', headers: { 'content-type': 'application/json' } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: string; message?: string };
        if (response.statusCode === 200) return resolve(body);
        reject(isErrorCode(body.error) ? new AppError(body.error, body.message ?? body.error) : new Error(body.message));
      });
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT' || error.code === 'ECONNREFUSED') reject(new AdminChannelUnavailable(error.message));
      else reject(error);
    });
    request.end(JSON.stringify(input));
  });
}
