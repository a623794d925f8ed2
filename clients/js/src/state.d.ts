// @agent-projector/client: the session state's types (no runtime code).
//
// Owns the shape of `snapshot.state` field by field (docs/FRAMES.md, the
// server's src/projection/public_state): the OpenAPI document describes the
// state only as an open object, so these are written by hand on top of the
// generated frame and chunk types in schema.d.ts.

import type { ChunkItem, DeltaFrame, LiveFrame, ResetFrame, SnapshotFrame, UIMessageChunk } from './schema.js';

export type { ChunkItem, DeltaFrame, LiveFrame, ResetFrame, SnapshotFrame, UIMessageChunk };

export type RuntimeStatus =
  | 'idle' | 'accepted' | 'routing' | 'preparing' | 'running' | 'waiting' | 'blocked' | 'retrying'
  | 'completed' | 'failed' | 'cancelled' | 'interrupted' | 'stale' | 'unknown';

export interface Runtime {
  status: RuntimeStatus | (string & {});
  runId?: string;
  turnId?: string;
  threadId?: string;
  phase?: string;
  failureCategory?: string;
  retryable?: boolean;
  stale: boolean;
  pendingActions: number;
  updatedAt?: string;
}

export type ToolState =
  | 'input-streaming' | 'input-available' | 'approval-requested'
  | 'output-available' | 'output-error' | 'output-denied';

export interface TextPart { type: 'text'; text: string; state: 'streaming' | 'done' }
export interface ReasoningPart { type: 'reasoning'; id: string; text: string; state: 'streaming' | 'done' }
export interface ToolPart {
  type: `tool-${string}`;
  toolCallId: string;
  state: ToolState;
  title?: string;
  input?: unknown;
  output?: unknown;
  errorText?: string;
  preliminary?: boolean;
  approval?: { id: string; requestReason?: string };
}
export interface SourceUrlPart { type: 'source-url'; sourceId: string; url: string; title?: string }
export interface SourceDocumentPart {
  type: 'source-document'; sourceId: string; mediaType: string; title: string; filename?: string;
}
export interface FilePart { type: 'file'; mediaType: string; url: string }
export interface StepStartPart { type: 'step-start' }
export interface DataPart { type: `data-${string}`; id?: string; data: unknown }

/** A message part in the Vercel AI SDK `UIMessage` part shapes. */
export type Part =
  | TextPart | ReasoningPart | ToolPart | SourceUrlPart | SourceDocumentPart | FilePart | StepStartPart | DataPart;

export interface Message {
  id: string;
  role: 'user' | 'assistant' | 'system';
  status: 'streaming' | 'complete' | 'failed' | 'aborted';
  agentId?: string;
  turnId?: string;
  runId?: string;
  createdCursor: number;
  metadata?: Record<string, unknown>;
  errorText?: string;
  parts: Part[];
  /** Text/reasoning parts still open: [chunk id, part index]. */
  openParts?: [string, number][];
}

export interface ToolEntry {
  toolCallId: string; toolName: string; status: string; messageId?: string; title?: string;
  inputSummary?: string; progress?: unknown; outputRefs: string[]; errorText?: string;
  failureCategory?: string; startedCursor: number; updatedCursor: number; kind?: string; exitCode?: number;
}

export interface ActionEntry {
  actionId: string; status: 'pending' | (string & {}); actionType?: string; title?: string; decision?: string;
  toolCallId?: string; requestedBy?: string; messageId?: string; requestedCursor?: number; resolvedCursor?: number;
  question?: string; detail?: string; options?: unknown; schema?: unknown; toolName?: string; input?: unknown;
  risk?: string; scope?: unknown; plan?: unknown; grant?: unknown; credential?: unknown;
  artifactId?: string; versionId?: string; expiresAt?: string;
}

export interface ArtifactEntry {
  artifactId: string; title?: string; kind?: string; status?: string; versionId?: string; path?: string;
  refs: string[]; messageId?: string; updatedCursor: number;
}

export interface EvidenceEntry {
  evidenceId: string; title?: string; verdict?: string; url?: string; source?: string; snippet?: string;
  date?: string; mediaType?: string; filename?: string; refs: string[]; messageId?: string; updatedCursor: number;
}

export interface TaskEntry {
  taskId: string; parentTaskId?: string; status: string; title?: string; agentId?: string; assignee?: string;
  priority?: unknown; blocker?: string; dependencies?: string[]; refs?: string[]; runtimeEntity?: string;
  updatedCursor: number;
}

export interface AgentEntry {
  agentId: string; name?: string; role?: string; status: string; parentSessionId?: string;
  parentThreadId?: string; taskId?: string; model?: string; teamName?: string; policy?: unknown;
  latestTurnStatus?: string; transcriptRef?: string; needsInput?: boolean; planReady?: boolean;
  agentCard?: unknown; remoteTaskId?: string; needsAuth?: boolean; schedule?: unknown; wakeReason?: string;
  lineage: string; updatedCursor: number;
}

export interface PlanEntry {
  planId: string; status: 'streaming' | 'final' | (string & {}); text: string; steps?: unknown;
  agentId?: string; messageId?: string; updatedCursor: number;
}

export interface Diagnostic {
  id: string; code: string; severity: 'info' | 'warning' | 'error'; class: string; eventId: string;
  cursor: number; message: string; toolCallId?: string;
}

/**
 * A timeline entry. The snapshot's entries carry every field; the entries a
 * client adds from delta frames carry only `cursor`, `eventId` and `class`
 * (a frame says no more of its event).
 */
export interface TimelineEntry {
  cursor: number; eventId: string; class: string; sourceClass?: string; status?: string; title?: string;
  timestamp?: string; taxonomy?: Record<string, string>;
}

export interface SessionState {
  sessionId?: string;
  runtime: Runtime;
  messages: Message[];
  tools: Record<string, ToolEntry>;
  actions: Record<string, ActionEntry>;
  artifacts: Record<string, ArtifactEntry>;
  evidence: Record<string, EvidenceEntry>;
  tasks: Record<string, TaskEntry>;
  agents: Record<string, AgentEntry>;
  team: {
    roster: string[]; handoffs: Record<string, unknown>[]; reviews: Record<string, unknown>[];
    notifications: Record<string, unknown>[]; channels: Record<string, unknown>[];
    edges: { from: string; to: string; kind: string }[]; info: Record<string, unknown>;
  };
  queue: Record<string, unknown>;
  context: {
    status?: 'resolved' | 'missing' | 'compacting' | 'unknown'; refs: string[]; budget?: unknown;
    missing: string[]; compactions: unknown[]; updatedCursor?: number;
  };
  permissions: {
    mode?: string; risk?: string; sandbox?: string; lastDecision?: unknown; blocks: unknown[];
    agents: Record<string, unknown>; updatedCursor?: number;
  };
  coding: {
    files: Record<string, unknown>; patches: Record<string, unknown>; commands: Record<string, unknown>;
    tests: Record<string, unknown>; blocks: Record<string, unknown>[];
  };
  plans: Record<string, PlanEntry>;
  app: Record<string, unknown>;
  topology?: string;
  session: { title?: string; pinned?: boolean; archived?: boolean; updatedCursor?: number };
  toolCatalog?: Record<string, unknown>;
  diagnostics: Diagnostic[];
  timeline: TimelineEntry[];
  uiLocal?: { cursor: number; eventId: string; class: string; owner?: string; persistence?: string }[];
  /** How the snapshot's message window relates to the projection's messages. */
  history?: { messages: number; inSnapshot: number; nextBefore?: string };
}

/** A snapshot frame whose state is typed. */
export type SessionSnapshotFrame = Omit<SnapshotFrame, 'state'> & { state: SessionState };

/** A frame of one session. */
export type SessionFrame = SessionSnapshotFrame | DeltaFrame | ResetFrame;

/** A frame of a multiplexed stream: a session frame with its `sessionId`. */
export type MuxFrame = SessionFrame & { sessionId: string };
