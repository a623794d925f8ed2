// Types of react.js: React hooks (react >= 18 as a peer dependency).
import type { Connection } from './connection.js';
import type { ControlFields } from './controls.js';
import type { Limits } from './projection.js';
import type { Relayed } from './schema.js';
import type { IndexEntry, SessionIndex } from './session-index.js';
import type { SessionState } from './state.js';
import type { ConnectionStatus, StreamOptions } from './stream.js';

export interface UseSessionOptions extends Omit<StreamOptions, 'start'> {
  /** A shared connection: the session is added to it while the hook needs it. */
  connection?: Connection | null;
  limits?: Partial<Limits>;
}

export interface UseSession {
  state: SessionState | null;
  status: ConnectionStatus;
  cursor: number;
  epoch: string | null;
  resetReason: string | null;
  connection: Connection | null;
  approve(actionId: string, fields?: ControlFields): Promise<Relayed>;
  reject(actionId: string, fields?: ControlFields): Promise<Relayed>;
  answer(actionId: string, value: unknown, fields?: ControlFields): Promise<Relayed>;
  cancel(fields?: ControlFields): Promise<Relayed>;
  send(text: string, fields?: ControlFields & { messageId?: string }): Promise<Relayed>;
}

export declare function useSession(sessionId: string | null | undefined, opts?: UseSessionOptions): UseSession;

export interface UseSessionIndexOptions extends Omit<StreamOptions, 'start'> {
  /** A shared index watcher. */
  index?: SessionIndex | null;
}

export declare function useSessionIndex(opts?: UseSessionIndexOptions): {
  sessions: IndexEntry[];
  status: ConnectionStatus;
  ready: boolean;
  index: SessionIndex | null;
};
