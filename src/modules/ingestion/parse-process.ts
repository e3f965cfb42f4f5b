// A parsing process: started by the parse pool (parse-pool.ts) with an IPC channel, it parses and
// chunks one document at a time and answers over that channel. It ends when the channel closes,
// so a server that dies, even by `kill -9`, leaves no parser behind.
import { cpusFromArguments, placeThisProcess } from '../../thread-placement.js';
import type { ParseProgress, ParseTask, ParseTaskResult } from './parse-task.js';
import { runParseTask } from './parse-task.js';

/** What the pool sends: a document to parse. */
export type ParseRequest = { task: ParseTask };

/** What a parsing process sends back: once ready, then progress and one answer per request. */
export type ParseReply =
  | { kind: 'ready' }
  | { kind: 'progress'; progress: ParseProgress }
  | { kind: 'result'; result: ParseTaskResult }
  | { kind: 'error'; message: string };

if (!process.send) throw new Error('parse-process runs as a child process with an IPC channel (parse-pool.ts)');
// Started by the HTTP thread, this process has that thread's CPUs until it takes the ones it was
// given. Without them (no taskset) it parses where it is: the server's log says why already.
const cpus = cpusFromArguments(process.argv);
if (cpus) placeThisProcess(cpus);
const reply = (message: ParseReply) => process.send!(message);

process.on('disconnect', () => process.exit(0));
// Ctrl-C in a terminal and a service manager's stop reach every process of the group: the server
// decides when a parse ends (it aborts the parse, or closes the pool), so that a stop is not
// taken for a crash of the parser, which would count against the document's attempts.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
process.on('message', (message: ParseRequest) => {
  runParseTask(message.task, (progress) => reply({ kind: 'progress', progress })).then(
    (result) => reply({ kind: 'result', result }),
    // A fault of the parser itself, not of the document: the pool reports it and the job is retried.
    (error: unknown) => reply({ kind: 'error', message: error instanceof Error ? error.message : String(error) }),
  );
});
reply({ kind: 'ready' });
