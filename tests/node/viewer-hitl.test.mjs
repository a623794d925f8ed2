// The viewer renders what a human-in-the-loop request asks (issue 16 item
// 1) in headless Chromium: the question, the safe input and the form drawn
// from the request's JSON Schema. What the user types survives live
// re-renders; an answer the schema refuses comes back as the server's 422
// reasons and never reaches the runtime; a valid one, and a click on an
// option, reach a real local runtime through the controls relay.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { startServer, post } from './lib/server.mjs';
import { CHROMIUM, NO_CHROMIUM, launchChromium } from './lib/browser.mjs';

const T = 15000;

let server;
let browser;
let runtime;
const received = [];
let arrived = () => {};

before(async () => {
  if (!existsSync(CHROMIUM)) return;
  // The runtime's control endpoint: records every relayed body, answers 200.
  runtime = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push(JSON.parse(body));
      res.writeHead(200).end('{}');
      arrived();
    });
  }).listen(0, '127.0.0.1');
  await once(runtime, 'listening');
  server = await startServer([], {
    PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([`127.0.0.1:${runtime.address().port}`]),
    PROJECTOR_CONTROLS__SIGNING_SECRET: 'hitl-test-secret',
  });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  runtime?.close();
});

/** Wait until the runtime has received `n` relayed bodies. */
async function relayed(n) {
  while (received.length < n) await new Promise((r) => (arrived = r));
}

test('viewer: a structured_input request renders as a form checked by the server; options answer in one click', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const sid = `hitl-${process.pid}`;
  const run = { runId: 'r1', turnId: 't1' };
  await post(server.base, sid, [
    { id: 'open', type: 'session.created', ...run, payload: { controlUrl: `http://127.0.0.1:${runtime.address().port}/controls` } },
    { id: 'e1', type: 'run.started', ...run },
    { id: 'e2', type: 'text.delta', ...run, payload: { delta: 'I need two details. ' } },
    { id: 'e3', type: 'action.required', ...run, actionId: 'form-1', title: 'Deployment details',
      payload: { actionType: 'structured_input', question: 'Where should it run?',
        safeInput: { service: 'api' },
        inputSchema: { type: 'object', required: ['region', 'owner'], additionalProperties: false,
          properties: {
            region: { enum: ['eu-west', 'us-east'], title: 'Region' },
            replicas: { type: 'integer', minimum: 1, title: 'Replicas' },
            owner: { type: 'string', minLength: 2, title: 'Owner' },
            canary: { type: 'boolean', title: 'Canary first' } } } } },
  ]);

  const page = await browser.newPage();
  await page.goto(`${server.base}/?session=${sid}`);
  const card = page.locator('[data-testid=action-card][data-action-id=form-1]').first();
  await card.getByTestId('answer-form').waitFor({ timeout: T });
  assert.equal(await card.getByTestId('request-question').textContent(), 'Where should it run?');
  assert.match(await card.getByTestId('request-input').textContent(), /"service":"api"/);

  // Type, then let a live frame re-render the message: the typing stays.
  await card.getByTestId('field-owner').fill('a');
  await post(server.base, sid, [{ id: 'e4', type: 'text.delta', ...run, payload: { delta: 'Still waiting. ' } }]);
  await page.getByText('Still waiting.').waitFor({ timeout: T });
  assert.equal(await card.getByTestId('field-owner').inputValue(), 'a', 'the draft survives the re-render');

  // Too short an owner, no region: the server's schema check answers.
  await card.getByTestId('field-replicas').fill('0');
  await card.getByTestId('answer-submit').click();
  await page.waitForFunction(
    () => /not accepted/.test(document.querySelector('[data-action-id=form-1] [data-testid=action-notice]')?.textContent ?? ''),
    null, { timeout: T });
  const why = await card.getByTestId('action-notice').textContent();
  t.diagnostic(why);
  assert.match(why, /owner/);
  assert.match(why, /replicas/);
  assert.equal(received.length, 0, 'nothing invalid reached the runtime');

  // A valid answer reaches the runtime with the typed values.
  await card.getByTestId('field-region').selectOption({ label: 'eu-west' });
  await card.getByTestId('field-replicas').fill('3');
  await card.getByTestId('field-owner').fill('ana');
  await card.getByTestId('field-canary').check();
  await card.getByTestId('answer-submit').click();
  await relayed(1);
  assert.equal(received[0].actionId, 'form-1');
  assert.equal(received[0].decision, 'answer');
  assert.deepEqual(received[0].answer, { region: 'eu-west', replicas: 3, owner: 'ana', canary: true });
  await page.waitForFunction(
    () => /Sent to the runtime/.test(document.querySelector('[data-action-id=form-1] [data-testid=action-notice]')?.textContent ?? ''),
    null, { timeout: T });

  // A clarification with options: one click answers with the option's value.
  await post(server.base, sid, [
    { id: 'e5', type: 'action.required', ...run, actionId: 'ask-1',
      payload: { actionType: 'clarification', question: 'Which branch?',
        options: [{ value: 'main', label: 'main' }, { value: 'release/2', label: 'release 2' }] } },
  ]);
  const ask = page.locator('[data-testid=action-card][data-action-id=ask-1]').first();
  await ask.getByText('release 2').click();
  await relayed(2);
  assert.equal(received[1].actionId, 'ask-1');
  assert.equal(received[1].answer, 'release/2');
  // Only the runtime resolves: both stay pending.
  assert.equal(await card.getAttribute('data-status'), 'pending');
  await page.close();
});
