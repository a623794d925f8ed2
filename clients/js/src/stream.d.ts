// Types of stream.js: one SSE stream that reconnects.
import type { Emitter } from './emitter.js';
import type { ClientOptions, ProjectorError } from './http.js';
import type { SSEEvent } from './sse.js';

export interface BackoffOptions {
  /** First delay (default 500 ms). */
  initialMs?: number;
  /** Largest delay (default 30 s). */
  maxMs?: number;
  /** Growth per attempt (default 2). */
  factor?: number;
  /** Share of each delay taken off at random, 0..1 (default 0.5). */
  jitter?: number;
}

export type Backoff = BackoffOptions | ((attempt: number) => number);

export interface StreamOptions extends ClientOptions {
  backoff?: Backoff;
  /** Reconnect when no byte (not even a heartbeat) arrives for this long (default 45 s; 0: never). */
  idleTimeoutMs?: number;
  /** false: do not connect until start() is called. */
  start?: boolean;
}

/**
 * `idle`: nothing to stream; `connecting`: first attempt; `open`: reading
 * (the session index); `catching-up`: reading the sessions' history (the
 * replay since the cursors held, or their snapshots); `live`: every session
 * of the connection said it is live (its `live` frame), what comes now is
 * new; `reconnecting`: dropped, trying again; `failed`: an answer that
 * retrying cannot change (call restart()); `closed`: close() was called.
 */
export type ConnectionStatus = 'idle' | 'connecting' | 'open' | 'catching-up' | 'live' | 'reconnecting' | 'failed' | 'closed';

export interface StreamEvents {
  status: ConnectionStatus;
  error: ProjectorError;
  close: undefined;
}

export declare const DEFAULT_BACKOFF: Readonly<Required<BackoffOptions>>;
export declare function backoffDelay(attempt: number, backoff?: Backoff): number;

export declare class ReconnectingStream<Events extends StreamEvents = StreamEvents> extends Emitter<Events> {
  constructor(opts: StreamOptions, what: string);
  status: ConnectionStatus;
  lastError: ProjectorError | null;
  closed: boolean;
  start(): void;
  restart(): void;
  close(): void;
  protected url(): string | null;
  protected openStatus(): ConnectionStatus;
  protected onEvent(ev: SSEEvent): 'restart' | void;
  protected onHttpError(err: ProjectorError): 'retry' | void;
}
