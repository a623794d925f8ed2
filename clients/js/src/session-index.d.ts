// Types of session-index.js: the live session index.
import type { SessionEntry } from './schema.js';
import type { ReconnectingStream, StreamEvents, StreamOptions } from './stream.js';

/** One session of the index (docs/STREAMS.md): the OpenAPI document's SessionEntry. */
export type IndexEntry = SessionEntry;

export interface IndexChange {
  type: 'snapshot' | 'created' | 'updated' | 'deleted' | 'reset';
  sessionId?: string;
  entry?: IndexEntry;
  reason?: string;
  cursor?: number;
  /** The whole index after the change (a new Map at each change). */
  sessions: Map<string, IndexEntry>;
}

export interface IndexEvents extends StreamEvents {
  change: IndexChange;
}

export declare class SessionIndex extends ReconnectingStream<IndexEvents> implements AsyncIterable<IndexChange> {
  constructor(opts?: StreamOptions);
  sessions: Map<string, IndexEntry>;
  /** The index position `<epoch>:<cursor>` of the last event ('' before any). */
  position: string;
  ready: boolean;
  list(): IndexEntry[];
  until(predicate: (sessions: Map<string, IndexEntry>) => boolean, opts?: { timeoutMs?: number }): Promise<Map<string, IndexEntry>>;
  [Symbol.asyncIterator](): AsyncIterableIterator<IndexChange>;
}

export declare function watchIndex(opts?: StreamOptions): SessionIndex;
