// Types of projection.js: the pure fold of one session's frames.
import type { DeltaFrame, SessionFrame, SessionState } from './state.js';

export type * from './state.js';

export interface Limits {
  maxMessages: number;
  maxTimeline: number;
  maxDiagnostics: number;
  maxUiLocal: number;
}

export declare const SURFACE_MAPS: readonly ['tools', 'actions', 'artifacts', 'evidence', 'tasks', 'agents', 'plans'];
export declare const DEFAULT_LIMITS: Readonly<Limits>;

export declare function emptyState(): SessionState;
export declare function normalizeState(s: Partial<SessionState> | null | undefined): SessionState;

/** 'applied'; 'ignored' (an old delta, or none while no snapshot is held); 'gap' (frames were lost). */
export type ApplyResult = 'applied' | 'ignored' | 'gap';

export declare class SessionProjection {
  constructor(sessionId: string, limits?: Partial<Limits>);
  readonly sessionId: string;
  readonly limits: Limits;
  /** Null before the first snapshot, and from a reset until the next one. */
  state: SessionState | null;
  cursor: number;
  epoch: string | null;
  resetReason: string | null;
  /** Surfaces this client does not know: surface -> id -> data. */
  extra: Record<string, Record<string, unknown>>;
  /** `<epoch>:<cursor>`, or '' while there is no state. */
  readonly position: string;
  apply(frame: SessionFrame): ApplyResult;
}

export declare function applyDelta(
  state: SessionState,
  frame: DeltaFrame,
  limits?: Partial<Limits>,
  extra?: Record<string, Record<string, unknown>>,
): SessionState;
