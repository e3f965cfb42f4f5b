import type { Config } from './config.js';
import { requestContext } from './observability/request-context.js';

export type Logger = {
  info(message: string, details?: unknown): void;
  error(message: string, details?: unknown): void;
  /** One structured line per request: a JSON object (docs/observability.md). */
  access(record: Record<string, unknown>): void;
};

const levels = { silent: 0, error: 1, info: 2, debug: 3 } as const;

/**
 * One line per event on stderr, so stdout stays for what commands print (keys, JSON). A line
 * written while a request is served names it (`request_id=...`), as its access line does.
 */
export function createLogger(level: Config['logLevel']): Logger {
  const write = (label: string, message: string, details?: unknown) => {
    const suffix = details instanceof Error ? `\n${details.stack}` : details === undefined ? '' : ` ${JSON.stringify(details)}`;
    const requestId = requestContext.getStore()?.requestId;
    process.stderr.write(`${new Date().toISOString()} ${label} ${requestId ? `request_id=${requestId} ` : ''}${message}${suffix}\n`);
  };
  return {
    info: (message, details) => void (levels[level] >= levels.info && write('info', message, details)),
    error: (message, details) => void (levels[level] >= levels.error && write('error', message, details)),
    access: (record) => void (levels[level] >= levels.info && process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level: 'info', msg: 'request', ...record })}\n`)),
  };
}
