import type { Config } from './config.js';

export type Logger = {
  info(message: string, details?: unknown): void;
  error(message: string, details?: unknown): void;
};

const levels = { silent: 0, error: 1, info: 2, debug: 3 } as const;

/** One line per event on stderr, so stdout stays for what commands print (keys, JSON). */
export function createLogger(level: Config['logLevel']): Logger {
  const write = (label: string, message: string, details?: unknown) => {
    const suffix = details instanceof Error ? `\n${details.stack}` : details === undefined ? '' : ` ${JSON.stringify(details)}`;
    process.stderr.write(`${new Date().toISOString()} ${label} ${message}${suffix}\n`);
  };
  return {
    info: (message, details) => void (levels[level] >= levels.info && write('info', message, details)),
    error: (message, details) => void (levels[level] >= levels.error && write('error', message, details)),
  };
}
