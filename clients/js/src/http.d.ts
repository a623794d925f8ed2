// Types of http.js: shared options and the error type.
import type { ProblemItem } from './schema.js';

/** A bearer token, or a function that returns one (called at each request and reconnection). */
export type TokenSource = string | null | undefined | (() => string | null | undefined | Promise<string | null | undefined>);

export interface ClientOptions {
  /** The server, e.g. `http://localhost:8080` ('' or omitted: same origin). */
  baseUrl?: string;
  token?: TokenSource;
  fetch?: typeof globalThis.fetch;
  headers?: Record<string, string>;
}

export declare class ProjectorError extends Error {
  constructor(message: string, info?: {
    status?: number; code?: string; detail?: string; title?: string; type?: string;
    errors?: unknown[]; body?: unknown; cause?: unknown;
  });
  /** HTTP status; 0 when the server could not be reached. */
  status: number;
  /** The problem's `code` (`network_error`, `timeout`, `closed`, `gap`, ... for client-side failures). */
  code: string;
  detail: string;
  title: string;
  type: string;
  errors: ProblemItem[];
  body: unknown;
}

export declare function errorFrom(resp: Response, what: string): Promise<ProjectorError>;
export declare function networkError(what: string, cause: unknown): ProjectorError;
export declare function normalizeBase(baseUrl: string | undefined): string;
export declare function pickFetch(f?: typeof globalThis.fetch): typeof globalThis.fetch;
export declare function resolveToken(token: TokenSource): Promise<string>;
export declare function headersFor(opts: ClientOptions, accept: string, extra?: Record<string, string>): Promise<Record<string, string>>;
export declare function randomId(): string;
export declare function sessionPath(sessionId: string): string;
