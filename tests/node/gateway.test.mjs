// Issue 14: the chat gateway with the `ai` version the project pins (the
// shared scenarios: send, resume mid-answer in a second tab, stop, a failing
// model), and the approval round trip the AI SDK way: a tool with
// `needsApproval` asks, the browser answers with the real
// `addToolApprovalResponse`, the chat sends itself again
// (`lastAssistantMessageIsCompleteWithApprovalResponses`) and the route runs
// or skips the tool. The session's action follows the route, never the
// browser alone.
import * as ai from 'ai';
import * as aiTest from 'ai/test';
import { z } from 'zod';
import { approvalScenarios, chatScenarios } from './lib/gateway-suite.mjs';

chatScenarios('ai (pinned)', { ai, aiTest, spec: 'v3' });

approvalScenarios('ai (pinned)', { ai, aiTest, z });
