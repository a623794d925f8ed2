// Issue 14: the chat gateway scenarios with the latest `ai` 5.x (installed as
// the `ai5` alias) on both sides, so apps that have not moved to the pinned
// major get the same durable, resumable chat. ai 5 has no tool approvals.
import * as ai from 'ai5';
import * as aiTest from 'ai5/test';
import { chatScenarios } from './lib/gateway-suite.mjs';

chatScenarios('ai 5.x', { ai, aiTest, spec: 'v2' });
