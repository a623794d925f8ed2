// Debian's chromium through playwright-core, as every browser test starts it.
// CHROMIUM_PATH names another binary; tests skip (saying how to install it)
// when there is none.
import { existsSync } from 'node:fs';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const NO_CHROMIUM = `chromium not installed at ${CHROMIUM}: apt-get install chromium`;

/** Launch headless Chromium (with `extra` arguments), or undefined when it is not installed. */
export async function launchChromium(extra = []) {
  if (!existsSync(CHROMIUM)) return undefined;
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', ...extra],
  });
}

/**
 * For a page that `page.route` fulfils: such a page has no address, which
 * Chromium's Local Network Access checks take for a public one, so its
 * WebSocket to the loopback server would be blocked; a page the server (on
 * loopback) served itself is not. This turns those checks off.
 */
export const ROUTED_PAGE_MAY_USE_LOOPBACK = ['--disable-features=LocalNetworkAccessChecks'];
