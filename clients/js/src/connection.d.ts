// Types of connection.js: many sessions on one multiplexed connection.
import type { ControlFields, Controls } from './controls.js';
import type { Limits, SessionProjection } from './projection.js';
import type { Relayed } from './schema.js';
import type { MuxFrame, SessionState } from './state.js';
import type { ReconnectingStream, StreamEvents, StreamOptions } from './stream.js';

export interface ConnectOptions extends StreamOptions {
  /** The sessions to follow, in the order the connection names them. */
  sessions?: string[];
  /** Bounds the projection keeps (the server's defaults). */
  limits?: Partial<Limits>;
}

export interface Change {
  sessionId: string;
  /** The session's state after the frame: null after a reset, until the snapshot. */
  state: SessionState | null;
  frame: MuxFrame;
  cursor: number;
  epoch: string | null;
}

export interface ConnectionEvents extends StreamEvents {
  change: Change;
  /** A session's replay ended: it holds its log up to `cursor`, and what follows is live. */
  live: { sessionId: string; cursor: number };
  sessions: string[];
}

export declare function parsePositions(id: string): string[];

export declare class Connection extends ReconnectingStream<ConnectionEvents> implements AsyncIterable<Change> {
  constructor(opts?: ConnectOptions);
  readonly controls: Controls;
  readonly sessions: string[];
  state(sessionId: string): SessionState | null;
  projection(sessionId: string): SessionProjection | undefined;
  cursor(sessionId: string): number;
  /** Whether the session's history was read on the connection being read (its `live` frame came). */
  isLive(sessionId: string): boolean;
  add(sessionId: string): void;
  remove(sessionId: string): void;
  until(sessionId: string, predicate: (state: SessionState) => boolean,
    opts?: { signal?: AbortSignal; timeoutMs?: number }): Promise<SessionState>;
  [Symbol.asyncIterator](): AsyncIterableIterator<Change>;
  approve(sessionId: string, actionId: string, fields?: ControlFields): Promise<Relayed>;
  reject(sessionId: string, actionId: string, fields?: ControlFields): Promise<Relayed>;
  answer(sessionId: string, actionId: string, value: unknown, fields?: ControlFields): Promise<Relayed>;
  cancel(sessionId: string, fields?: ControlFields): Promise<Relayed>;
  send(sessionId: string, text: string, fields?: ControlFields & { messageId?: string }): Promise<Relayed>;
}

export declare function connect(opts: ConnectOptions): Connection;
