// Issue 14 in a real browser: `useChat` from `@ai-sdk/react` (the pinned
// `ai`) in headless Chromium, with `DefaultChatTransport` pointed at
// agent-projector's `/v1/chat` (and, issue 35, with `WebSocketChatTransport`
// on `/v1/chat/ws`), in front of an AI SDK route (`streamText` on
// the SDK's mock model). Send and stream; reload mid-answer and resume in
// that tab and in a second one with identical parts; stop while the route
// goes on; a failing model shown as the chat's error; a tool approval
// answered with the page's own buttons. The page is bundled with esbuild
// and served at agent-projector's origin, as an app's page would be.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ai from 'ai';
import * as aiTest from 'ai/test';
import { z } from 'zod';
import { build } from 'esbuild';
import { ANSWER, approvals, gateway, text } from './lib/gateway-suite.mjs';
import { snapshot } from './lib/server.mjs';
import { CHROMIUM, NO_CHROMIUM, ROUTED_PAGE_MAY_USE_LOOPBACK, launchChromium } from './lib/browser.mjs';

const T = 15000;
const here = path.dirname(fileURLToPath(import.meta.url));

for (const transport of ['http', 'ws']) describe(`useChat in headless Chromium through the gateway (${transport === 'ws' ? 'WebSocketChatTransport' : 'DefaultChatTransport'})`, () => {
  const { tools, model } = approvals({ ai, aiTest, z });
  const g = gateway({ ai, aiTest, spec: 'v3', tools, model });
  let browser;
  let html;

  before(async () => {
    if (!existsSync(CHROMIUM)) return;
    const out = await build({
      entryPoints: [path.join(here, 'browser/chat-app.jsx')],
      bundle: true,
      write: false,
      format: 'iife',
      jsx: 'automatic',
      define: { 'process.env.NODE_ENV': '"production"' },
      logLevel: 'silent',
    });
    const js = out.outputFiles[0].text.replaceAll('</script', '<\\/script');
    html = `<!doctype html><meta charset="utf-8"><title>chat</title><div id="root"></div><script>${js}</script>`;
    browser = await launchChromium(ROUTED_PAGE_MAY_USE_LOOPBACK);
  });
  after(async () => {
    await browser?.close();
  });

  /** A tab on the app page for chat `id` (resuming on load when `resume`). */
  async function tab(id, resume = false) {
    const page = await browser.newPage();
    await page.route(`${g.server.base}/app/**`, (route) =>
      route.fulfill({ status: 200, contentType: 'text/html', body: html }));
    await page.goto(`${g.server.base}/app/chat?transport=${transport}&chat=${id}${resume ? '&resume' : ''}`);
    await page.waitForFunction(() => window.chat !== undefined, null, { timeout: T });
    return page;
  }
  const messages = (page) => page.evaluate(() => JSON.parse(JSON.stringify(window.chat.messages)));
  const status = (page) => page.evaluate(() => window.chat.status);
  async function send(page, words) {
    await page.fill('input[name=text]', words);
    await page.click('button[type=submit]');
  }
  /** Wait until the page's last assistant message has text containing `want` and the chat is `state`. */
  async function settled(page, want, state = 'ready') {
    await page.waitForFunction(([w, s]) => {
      const last = window.chat.messages.at(-1);
      const said = last?.role === 'assistant' && last.parts.some((p) => p.type === 'text' && p.text.includes(w));
      return said && window.chat.status === s;
    }, [want, state], { timeout: T });
  }

  test('send, reload mid-answer and resume, a second tab with identical parts', async (t) => {
    if (!browser) return t.skip(NO_CHROMIUM);
    const id = `uc-${transport}-${process.pid}-1`;
    g.closeGate();
    const first = await tab(id);
    await send(first, 'Weather in Oslo?');
    await first.locator('.message.assistant .text').first().waitFor({ timeout: T });
    // Mid-answer: the tab reloads, and comes back resuming from agent-projector.
    await first.goto(`${g.server.base}/app/chat?transport=${transport}&chat=${id}&resume`);
    await first.waitForFunction(() => window.chat?.messages.some((m) => m.role === 'assistant'), null, { timeout: T });
    const second = await tab(id, true);
    await second.waitForFunction(() => window.chat.messages.some((m) => m.role === 'assistant'), null, { timeout: T });
    assert.equal(await status(first), 'streaming');
    g.openGate();
    await settled(first, 'breeze');
    await settled(second, 'breeze');
    const [a1] = (await messages(first)).slice(-1);
    const [a2] = (await messages(second)).slice(-1);
    assert.equal(text(a1).trim(), ANSWER);
    assert.deepEqual(a2, a1, 'both tabs build the same message');
    const snap = await snapshot(g.server.base, id);
    assert.deepEqual(snap.state.messages.find((m) => m.id === a1.id).parts, a1.parts, 'and so does the session');
    await first.close();
    await second.close();
  });

  test('stop ends the tab\'s stream; the route goes on in the session', async (t) => {
    if (!browser) return t.skip(NO_CHROMIUM);
    const id = `uc-${transport}-${process.pid}-2`;
    g.closeGate();
    const page = await tab(id);
    await send(page, 'Weather again?');
    await page.locator('.message.assistant .text').first().waitFor({ timeout: T });
    await page.click('button.stop');
    await page.waitForFunction(() => window.chat.status === 'ready', null, { timeout: T });
    const shown = text((await messages(page)).at(-1));
    assert.ok(!shown.includes('breeze'), 'the tab stopped before the end');
    g.openGate();
    const done = await g.until(id, (s) => s.state.runtime.status === 'completed');
    assert.equal(text(done.state.messages.at(-1)).trim(), ANSWER);
    await page.close();
  });

  test('a failing model is the chat\'s error', async (t) => {
    if (!browser) return t.skip(NO_CHROMIUM);
    const id = `uc-${transport}-${process.pid}-3`;
    const page = await tab(id);
    await send(page, 'please fail');
    await page.locator('.error').waitFor({ timeout: T });
    assert.equal(await status(page), 'error');
    assert.equal((await snapshot(g.server.base, id)).state.runtime.status, 'failed');
    await page.close();
  });

  test('a tool approval answered on the page: the route runs the tool', async (t) => {
    if (!browser) return t.skip(NO_CHROMIUM);
    const id = `uc-${transport}-${process.pid}-4`;
    const page = await tab(id);
    await send(page, 'How many files are here?');
    await page.locator('.tool[data-state=approval-requested] .approve').click({ timeout: T });
    await settled(page, '3 files.');
    const answer = (await messages(page)).at(-1);
    const tool = answer.parts.find((p) => p.type === 'tool-shell');
    assert.equal(tool.state, 'output-available');
    assert.deepEqual(tool.output, { files: 3 });
    const snap = await g.until(id, (s) => s.state.runtime.status === 'completed');
    assert.equal(snap.state.actions[tool.approval.id].decision, 'approved');
    assert.deepEqual(snap.state.messages.find((m) => m.id === answer.id).parts, answer.parts);
    await page.close();
  });
});
