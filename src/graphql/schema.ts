import { builder } from './builder.js';
import './shared-types.js';
import '../modules/user/types.js';
import '../modules/credits/types.js';
import '../modules/apiKeys/types.js';
import '../modules/workspaces/types.js';
import '../modules/chat/types.js';
import '../modules/documents/types.js';
import '../modules/retrieval/types.js';
import '../modules/agent/types.js';
import '../modules/agent/run-types.js';

export const schema = builder.toSchema({ sortSchema: true });
