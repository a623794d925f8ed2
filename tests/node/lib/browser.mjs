// Debian's chromium through playwright-core, as every browser test starts it.
// CHROMIUM_PATH names another binary; tests skip (saying how to install it)
// when there is none.
import { existsSync } from 'node:fs';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const NO_CHROMIUM = `chromium not installed at ${CHROMIUM}: apt-get install chromium`;

/** Launch headless Chromium, or undefined when it is not installed. */
export async function launchChromium() {
  if (!existsSync(CHROMIUM)) return undefined;
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
