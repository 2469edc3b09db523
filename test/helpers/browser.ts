// Headless Debian Chromium driven by playwright-core (never a downloaded browser): open an HTML file, collect console
// errors and page errors, take screenshots. Tests skip (counted, test/helpers/skip.ts) when either is missing.
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Page } from 'playwright-core';

/** Debian's chromium (scripts/setup.sh installs it); PLANC_CHROMIUM overrides. */
export const CHROMIUM = process.env.PLANC_CHROMIUM ?? '/usr/bin/chromium';

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Why browser tests cannot run here, or undefined when they can (a reason for testIf). */
export function browserMissing(): string | undefined {
  if (!fs.existsSync(CHROMIUM)) return `need chromium at ${CHROMIUM} (apt-get install chromium; scripts/setup.sh)`;
  try {
    createRequire(import.meta.url).resolve('playwright-core');
  } catch {
    return 'need playwright-core (npm ci)';
  }
  return undefined;
}

/** A page open in Chromium, with the console errors and uncaught page errors seen so far. */
export interface OpenedPage {
  page: Page;
  problems: string[];
}

/**
 * Opens `htmlFile` (file://) in a fresh headless Chromium (its own user-data dir, no network services), waits for
 * load, runs `fn` and closes the browser. Network requests other than the file itself are recorded as problems.
 */
export async function withPage<T>(
  htmlFile: string,
  fn: (p: OpenedPage) => Promise<T>,
  viewport = { width: 1400, height: 900 },
): Promise<T> {
  const { chromium } = await import('playwright-core');
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport,
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    const problems: string[] = [];
    const url = pathToFileURL(path.resolve(htmlFile)).href;
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('request', (r) => {
      if (r.url() !== url && !r.url().startsWith('data:')) problems.push(`request: ${r.url()}`);
    });
    await page.goto(url, { waitUntil: 'load' });
    return await fn({ page, problems });
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

/** Saves a full-page screenshot to `file` (its folder created). */
export async function screenshot(page: Page, file: string): Promise<void> {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  await page.screenshot({ path: file, fullPage: true });
}
