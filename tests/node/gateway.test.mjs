// Issue 14: the chat gateway with the `ai` version the project pins (the
// shared scenarios: send, resume mid-answer in a second tab, stop, a failing
// model), and the approval round trip the AI SDK way: a tool with
// `needsApproval` asks, the browser answers with the real
// `addToolApprovalResponse`, the chat sends itself again
// (`lastAssistantMessageIsCompleteWithApprovalResponses`) and the route runs
// or skips the tool. The session's action follows the route, never the
// browser alone.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as ai from 'ai';
import * as aiTest from 'ai/test';
import { z } from 'zod';
import { approvals, chatScenarios, gateway, text } from './lib/gateway-suite.mjs';
import { snapshot, plain } from './lib/server.mjs';

chatScenarios('ai (pinned)', { ai, aiTest, spec: 'v3' });

const { tools, model } = approvals({ ai, aiTest, z });

describe('tool approval through the gateway, the AI SDK way', () => {
  const g = gateway({ ai, aiTest, spec: 'v3', tools, model });

  async function ask(id) {
    const tab = g.chat(id, { sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithApprovalResponses });
    await tab.chat.sendMessage({ text: 'How many files are here?' });
    const asked = plain(tab.chat.messages.at(-1));
    const tool = asked.parts.find((p) => p.type === 'tool-shell');
    assert.equal(tool?.state, 'approval-requested', JSON.stringify(asked));
    // The session holds the same request, as a pending action and in the part.
    const snap = await snapshot(g.server.base, id);
    assert.equal(snap.state.actions[tool.approval.id]?.status, 'pending');
    const ours = snap.state.messages.find((m) => m.id === asked.id);
    assert.deepEqual(ours.parts, asked.parts);
    return { ...tab, approval: tool.approval.id, messageId: asked.id };
  }

  /** Wait until the chat has settled on an answer after the automatic send. */
  async function answered(chat, want) {
    for (let i = 0; i < 500 && !(chat.status === 'ready' && text(chat.messages.at(-1)).includes(want)); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    return plain(chat.messages.at(-1));
  }

  test('approved: the route runs the tool and goes on in the same message', async () => {
    const id = `gw-approve-${process.pid}`;
    const { chat, errors, approval, messageId } = await ask(id);
    await chat.addToolApprovalResponse({ id: approval, approved: true });
    const answer = await answered(chat, '3 files.');
    assert.deepEqual(errors, []);
    assert.equal(answer.id, messageId, 'the continuation is the same message');
    const tool = answer.parts.find((p) => p.type === 'tool-shell');
    assert.equal(tool.state, 'output-available');
    assert.deepEqual(tool.output, { files: 3 });
    const snap = await g.until(id, (s) => s.state.runtime.status === 'completed');
    const action = snap.state.actions[approval];
    assert.equal(action.status, 'resolved');
    assert.equal(action.decision, 'approved');
    assert.deepEqual(snap.state.messages.find((m) => m.id === messageId).parts, answer.parts);
  });

  test('denied: the tool part ends `output-denied` and the action is denied', async () => {
    const id = `gw-deny-${process.pid}`;
    const { chat, errors, approval, messageId } = await ask(id);
    await chat.addToolApprovalResponse({ id: approval, approved: false, reason: 'not now' });
    const answer = await answered(chat, 'Not run.');
    assert.deepEqual(errors, []);
    const tool = answer.parts.find((p) => p.type === 'tool-shell');
    assert.equal(tool.state, 'output-denied');
    const snap = await g.until(id, (s) => s.state.runtime.status === 'completed');
    const action = snap.state.actions[approval];
    assert.equal(action.status, 'resolved');
    assert.equal(action.decision, 'denied');
    assert.deepEqual(snap.state.messages.find((m) => m.id === messageId).parts, answer.parts);
  });
});
