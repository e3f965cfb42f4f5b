import { fork, type ChildProcess } from 'node:child_process';
import type { ParseReply, ParseRequest } from './parse-process.js';
import type { ParseProgress, ParseTask, ParseTaskResult } from './parse-task.js';
import { cpusArgument } from '../../thread-placement.js';

export type ParsePool = {
  /**
   * Parses and chunks in a parsing process. Rejects with ParseLimitError when the parse needs
   * more memory than the pool allows, with the signal's reason when `signal` aborts (the process
   * is ended at once), and with ParserCrashError when the process ends any other way: a fault in
   * a parser's native code ends that process, never the server. `onProgress` hears what the
   * parse reports as it goes (a page about to be read by OCR).
   */
  parse(task: ParseTask, signal?: AbortSignal, onProgress?: (progress: ParseProgress) => void): Promise<ParseTaskResult>;
  /** Parsing processes running now (started, not yet ended). */
  readonly processes: number;
  /** Settles when the processes a warm pool starts have loaded the parsers (at once for a pool that does not warm). */
  readonly warmed: Promise<void>;
  close(): Promise<void>;
};

/** A parse stopped by a limit of the pool; retrying would stop it again. */
export class ParseLimitError extends Error {
  override name = 'ParseLimitError';
}

/** The parsing process ended during a parse (a crash in a parser): the parse may be tried again. */
export class ParserCrashError extends Error {
  override name = 'ParserCrashError';
}

export type ParsePoolOptions = {
  /** Heap limit of each process. */
  memoryMb: number;
  /**
   * How long a process with nothing to do is kept (KB_PARSE_THREAD_IDLE_SECONDS, 300 by default).
   * Starting two (loading the parsers) took 0.56 s here, and longer beside a bulk upload; a
   * client uploading in rounds should not pay it every round.
   */
  idleSeconds: number;
  /**
   * Starts every process now rather than on the first document, so a server's first upload is
   * parsed at once; unused, they end after `idleSeconds` like any idle process.
   */
  warm?: boolean;
  /**
   * The CPUs each process puts itself on as it starts (thread-placement.ts); else those of the
   * thread that starts it, which may be fewer than the machine's.
   */
  cpus?: number[];
};

type Waiting = {
  task: ParseTask;
  signal?: AbortSignal;
  onProgress?: (progress: ParseProgress) => void;
  resolve: (result: ParseTaskResult) => void;
  reject: (error: unknown) => void;
  /** The process parsing it, once it has one. */
  parser?: Parser;
  onAbort?: () => void;
};

type Parser = {
  child: ChildProcess;
  /** Settles when the process has loaded the parsers; rejects when it ends first. */
  ready: Promise<void>;
  current: Waiting | undefined;
  idleTimer: NodeJS.Timeout | undefined;
  /** The end of what the process wrote to stderr: V8 says there why it stopped (out of memory). */
  stderrTail: string;
  exited: Promise<void>;
};

const STDERR_TAIL_CHARS = 4096;

/**
 * Processes for parsing and chunking, so that no document ever blocks the HTTP event loop, and a
 * parser that crashes on a file (PDF rendering and image decoding run native code) takes its own
 * process down, not the server. Each process parses one document at a time.
 */
export function createParsePool(size: number, { memoryMb, idleSeconds, warm = false, cpus }: ParsePoolOptions): ParsePool {
  // Compiled (dist/): the process module itself. Sources run by tsx or vitest: a shim that registers tsx in the process.
  const entry = new URL(import.meta.url.endsWith('.ts') ? './parse-process.mjs' : './parse-process.js', import.meta.url);
  const parsers = new Set<Parser>();
  const queue: Waiting[] = [];
  let closed = false;

  function start(): Parser {
    const child = fork(entry, cpus ? [cpusArgument(cpus)] : [], {
      // The process's own flags, not the server's (a test runner's loaders, an inspector).
      execArgv: [`--max-old-space-size=${memoryMb}`],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    let markReady!: () => void;
    let markFailed!: (error: Error) => void;
    const parser: Parser = {
      child,
      ready: new Promise<void>((resolve, reject) => {
        markReady = resolve;
        markFailed = reject;
      }),
      current: undefined,
      idleTimer: undefined,
      stderrTail: '',
      exited: new Promise<void>((resolve) => child.once('close', () => resolve())),
    };
    parser.ready.catch(() => {});
    parsers.add(parser);
    let isReady = false;
    // What a parser writes to stderr is passed on a line at a time, each naming its process: a
    // parse that ran out of memory is reported as its document's failure, and V8's own account
    // of it must not read as the server's.
    let partialLine = '';
    const passOn = (line: string) => process.stderr.write(`parsing process ${child.pid}: ${line}\n`);
    child.stderr!.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      parser.stderrTail = (parser.stderrTail + text).slice(-STDERR_TAIL_CHARS);
      const lines = (partialLine + text).split('\n');
      partialLine = lines.pop()!;
      for (const line of lines) passOn(line);
    });
    child.stderr!.on('end', () => {
      if (partialLine) passOn(partialLine);
    });
    child.on('message', (message: ParseReply) => {
      if (message.kind === 'ready') {
        isReady = true;
        return markReady();
      }
      const waiting = parser.current;
      if (!waiting) return;
      if (message.kind === 'progress') return waiting.onProgress?.(message.progress);
      release(waiting);
      if (message.kind === 'result') waiting.resolve(message.result);
      else waiting.reject(new Error(message.message));
      idle(parser);
    });
    const ended = (how: string) => {
      if (!parsers.delete(parser)) return;
      clearTimeout(parser.idleTimer);
      const lastWords = parser.stderrTail.trim().split('\n').at(-1) ?? '';
      const notStarted = new ParserCrashError(`the parsing process ended before it was ready (${how})${lastWords ? `: ${lastWords}` : ''}`);
      markFailed(notStarted);
      const waiting = parser.current;
      if (waiting) {
        release(waiting);
        if (/heap out of memory|Reached heap limit/.test(parser.stderrTail)) {
          waiting.reject(new ParseLimitError(`parsing needed more than the memory limit of ${memoryMb} MB`));
        } else if (!isReady) {
          waiting.reject(notStarted);
        } else {
          waiting.reject(new ParserCrashError(`the parsing process ended while it read the file (${how})`));
        }
      }
      dispatch();
    };
    // 'close' comes after the process's stderr has been read to its end, so the tail is whole.
    child.once('close', (code, signal) => ended(signal ? `signal ${signal}` : `exit code ${code}`));
    // A process that could not be started at all has no close event. (A message sent to one that
    // has just ended fails in send's callback, and its close event says why.)
    child.on('error', (error) => {
      if (child.pid === undefined) ended(`it could not be started: ${error.message}`);
    });
    return parser;
  }

  /** The parse no longer has a process; its abort listener goes. */
  function release(waiting: Waiting) {
    if (waiting.parser) waiting.parser.current = undefined;
    waiting.parser = undefined;
    if (waiting.onAbort) waiting.signal?.removeEventListener('abort', waiting.onAbort);
  }

  /** Ends a process, which takes no parse from here on (its exit is awaited by no one). */
  function retire(parser: Parser) {
    parsers.delete(parser);
    clearTimeout(parser.idleTimer);
    parser.child.kill('SIGKILL');
  }

  /** Nothing to do: the process is kept for `idleSeconds`, and does not keep the server from exiting. */
  function idle(parser: Parser) {
    parser.child.channel?.unref();
    parser.child.unref();
    parser.idleTimer = setTimeout(() => retire(parser), idleSeconds * 1000);
    parser.idleTimer.unref();
    dispatch();
  }

  function assign(parser: Parser, waiting: Waiting) {
    clearTimeout(parser.idleTimer);
    parser.child.ref();
    parser.child.channel?.ref();
    parser.current = waiting;
    waiting.parser = parser;
    parser.ready.then(
      () => {
        if (parser.current === waiting) parser.child.send({ task: waiting.task } satisfies ParseRequest, () => {});
      },
      // The process ended first, and the parse was rejected with the reason.
      () => {},
    );
  }

  function dispatch() {
    while (!closed && queue.length > 0) {
      const free = [...parsers].find((parser) => parser.current === undefined);
      if (!free && parsers.size >= size) return;
      assign(free ?? start(), queue.shift()!);
    }
  }

  const warmed = warm
    ? Promise.all(
        Array.from({ length: size }, () => {
          const parser = start();
          idle(parser);
          return parser.ready;
        }),
      ).then(
        () => undefined,
        // A process that fails to start is started again by the first parse, which then reports the failure.
        () => undefined,
      )
    : Promise.resolve();

  return {
    warmed,
    parse(task, signal, onProgress) {
      if (closed) return Promise.reject(new Error('the parse pool is closed'));
      if (signal?.aborted) return Promise.reject(signal.reason);
      return new Promise<ParseTaskResult>((resolve, reject) => {
        const waiting: Waiting = { task, signal, onProgress, resolve, reject };
        // A waiting parse leaves the queue; a running one is dropped at once, and its process, mid-file, ended.
        waiting.onAbort = () => {
          const queued = queue.indexOf(waiting);
          if (queued !== -1) queue.splice(queued, 1);
          const parser = waiting.parser;
          release(waiting);
          reject(signal!.reason);
          if (parser) {
            retire(parser);
            dispatch();
          }
        };
        signal?.addEventListener('abort', waiting.onAbort, { once: true });
        queue.push(waiting);
        dispatch();
      });
    },
    get processes() {
      return parsers.size;
    },
    async close() {
      closed = true;
      const closedError = new Error('the parse pool is closed');
      for (const waiting of queue.splice(0)) {
        release(waiting);
        waiting.reject(closedError);
      }
      const running = [...parsers];
      for (const parser of running) {
        if (parser.current) {
          const waiting = parser.current;
          release(waiting);
          waiting.reject(closedError);
        }
        // Held while it ends: an idle process does not keep the event loop alive, and a server
        // closing after a failed start would otherwise exit, silently, before its error is said.
        parser.child.ref();
        parser.child.kill('SIGKILL');
      }
      await Promise.all(running.map((parser) => parser.exited));
    },
  };
}
