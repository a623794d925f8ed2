// Types of index.js: the package entry point.
import type { Connection, ConnectOptions } from './connection.js';
import type { Controls } from './controls.js';
import type { ClientOptions } from './http.js';
import type { SessionIndex } from './session-index.js';
import type { StreamOptions } from './stream.js';

export * from './connection.js';
export * from './session-index.js';
export * from './controls.js';
export { ProjectorError } from './http.js';
export type { ClientOptions, TokenSource } from './http.js';
export { DEFAULT_BACKOFF, backoffDelay } from './stream.js';
export type { Backoff, BackoffOptions, ConnectionStatus, ReconnectingStream, StreamEvents, StreamOptions } from './stream.js';
export * from './sse.js';
export * from './projection.js';
export type * as Schema from './schema.js';

export interface Client extends Controls {
  connect(sessions: string[], more?: Omit<ConnectOptions, 'sessions'>): Connection;
  watchIndex(more?: StreamOptions): SessionIndex;
}

export declare function createClient(opts?: ClientOptions & StreamOptions): Client;
