import { existsSync } from 'node:fs';

/**
 * The system's Chromium for the console's end-to-end tests (playwright-core downloads no
 * browser): KB_BROWSER when set, else Debian's or another usual install. Null when none is found.
 */
export function browserExecutable(): string | null {
  const candidates = [process.env.KB_BROWSER, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];
  return candidates.find((candidate): candidate is string => Boolean(candidate) && existsSync(candidate!)) ?? null;
}
