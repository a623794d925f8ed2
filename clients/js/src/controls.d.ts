// Types of controls.js: decisions, run controls and snapshot reads.
import type { ClientOptions } from './http.js';
import type { ControlType, Decision, Relayed } from './schema.js';
import type { SessionSnapshotFrame } from './state.js';

export interface ControlFields {
  /** The id of this logical request: the same id is the same idempotency key (random when omitted). */
  requestId?: string;
  signal?: AbortSignal;
  /** Other fields are passed through to the runtime. */
  [key: string]: unknown;
}

export interface Controls {
  decide(sessionId: string, actionId: string, decision: Decision, fields?: ControlFields): Promise<Relayed>;
  control(sessionId: string, type: ControlType, fields?: ControlFields): Promise<Relayed>;
  approve(sessionId: string, actionId: string, fields?: ControlFields): Promise<Relayed>;
  reject(sessionId: string, actionId: string, fields?: ControlFields): Promise<Relayed>;
  answer(sessionId: string, actionId: string, value: unknown, fields?: ControlFields): Promise<Relayed>;
  cancel(sessionId: string, fields?: ControlFields): Promise<Relayed>;
  send(sessionId: string, text: string, fields?: ControlFields & { messageId?: string }): Promise<Relayed>;
  snapshot(sessionId: string, opts?: { signal?: AbortSignal }): Promise<SessionSnapshotFrame>;
}

export declare function createControls(opts?: ClientOptions): Controls;
