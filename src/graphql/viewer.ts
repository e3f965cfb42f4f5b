import type { Viewer } from '../auth/authenticate.js';
import { authenticationRequired } from '../errors.js';
import type { Context } from './context.js';

/** The authenticated viewer; fields that call this also declare a scope, so it is always set. */
export function viewerOf(context: Context): Viewer {
  if (!context.viewer) throw authenticationRequired();
  return context.viewer;
}
