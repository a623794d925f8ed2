// The viewer with auth on: a token in the page URL reaches the stream (as
// `access_token`, since EventSource cannot set headers) and the approve
// request (as a bearer header); without one, the stream is refused.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import { startServer } from './lib/server.mjs';
import { CHROMIUM, NO_CHROMIUM, launchChromium } from './lib/browser.mjs';

const SECRET = 'viewer-test-secret';
const T = 15000;

/** An HS256 JWT, signed here with node:crypto. */
function jwt(claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${body}.${createHmac('sha256', SECRET).update(body).digest('base64url')}`;
}

let server;
let browser;

before(async () => {
  if (!existsSync(CHROMIUM)) return;
  server = await startServer([], { PROJECTOR_AUTH__MODE: 'jwt', PROJECTOR_AUTH__HS256_SECRET: SECRET });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('viewer: a token in the page URL authorises the stream and the controls', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const exp = Math.floor(Date.now() / 1000) + 600;
  const writer = jwt({ sub: 'runtime', exp, sessions: ['*'], scope: 'publish' });
  const viewer = jwt({ sub: 'ana', exp, sessions: ['auth-demo'], scope: 'subscribe control' });
  const r = await fetch(`${server.base}/v1/sessions/auth-demo/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${writer}` },
    body: JSON.stringify([
      { type: 'run.started', runId: 'r1', turnId: 't1' },
      { type: 'text.delta', runId: 'r1', turnId: 't1', payload: { delta: 'Authorised text.' } },
      { type: 'action.required', runId: 'r1', turnId: 't1', actionId: 'a1', payload: { actionType: 'tool_approval' } },
    ]),
  });
  assert.equal(r.status, 200);

  const page = await browser.newPage();
  const seen = [];
  page.on('request', (req) => seen.push(req));
  await page.goto(`${server.base}/?session=auth-demo&access_token=${viewer}`);
  await page.getByText('Authorised text.').waitFor({ timeout: T });
  const stream = seen.find((req) => req.url().includes('/stream'));
  assert.ok(stream.url().includes(`access_token=${viewer}`), 'the stream carries the token');

  const approve = page.locator('[data-testid="approve"]').first();
  await approve.click();
  const sent = seen.find((req) => req.url().includes('/actions/a1'));
  await page.waitForFunction(() => document.body.innerText.includes('409'), null, { timeout: T });
  assert.equal(sent.headers()['authorization'], `Bearer ${viewer}`, 'controls carry the bearer token');
  await page.close();

  // Without a token the stream is refused: the page never shows the text.
  const bare = await browser.newPage();
  const refused = bare.waitForResponse((res) => res.url().includes('/stream'), { timeout: T });
  await bare.goto(`${server.base}/?session=auth-demo`);
  assert.equal((await refused).status(), 401);
  assert.equal(await bare.getByText('Authorised text.').count(), 0);
  await bare.close();
});
