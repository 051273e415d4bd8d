// The page in a real browser (playwright-core driving Debian's chromium): fire both herds, read the
// numbers the page shows, and save the screenshot the README displays.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startDemo } from './app-process.mjs';

const CHROMIUM = '/usr/bin/chromium';
// The committed screenshot changes only when asked for (UPDATE_SCREENSHOT=1); a plain run writes
// its screenshot to the OS temp folder, so running the tests never dirties the work tree.
const SCREENSHOT =
  process.env.UPDATE_SCREENSHOT === '1'
    ? fileURLToPath(new URL('../docs/screenshot.png', import.meta.url))
    : join(tmpdir(), `stampede-demo-screenshot-${process.pid}.png`);
/** The whole page after the update, outage and steady-load panels have run. */
const SCREENSHOT_FULL =
  process.env.UPDATE_SCREENSHOT === '1'
    ? fileURLToPath(new URL('../docs/screenshot-panels.png', import.meta.url))
    : join(tmpdir(), `stampede-demo-screenshot-panels-${process.pid}.png`);

/** @type {import('./app-process.mjs').DemoProcess | undefined} */
let demo;
/** @type {import('playwright-core').BrowserContext | undefined} */
let browser;
const profile = mkdtempSync(join(tmpdir(), 'stampede-demo-chromium-'));

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: the browser test needs Debian's chromium (apt-get install -y chromium); it is never downloaded`,
    );
  }
  // The default data set, so the screenshot shows what `pnpm demo` shows.
  demo = await startDemo({ SEED_ROWS: '200000', DB_LATENCY_MS: '100', DB_POOL: '25' });
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1200, height: 800 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
});

afterAll(async () => {
  await browser?.close();
  if (process.env.UPDATE_SCREENSHOT !== '1') {
    rmSync(SCREENSHOT, { force: true });
    rmSync(SCREENSHOT_FULL, { force: true });
  }
  await demo?.stop();
  rmSync(profile, { recursive: true, force: true });
});

/** @param {import('playwright-core').Page} page @param {string} testId */
async function number(page, testId) {
  const text = await page.getByTestId(testId).textContent();
  return Number(text?.replaceAll(',', ''));
}

it('shows the unprotected herd hitting the database and the protected one making 1 query', async () => {
  if (demo === undefined || browser === undefined) throw new Error('set-up failed');
  const page = await browser.newPage();
  /** @type {string[]} */
  const offsite = [];
  page.on('request', (request) => {
    if (!request.url().startsWith(demo?.url ?? '')) offsite.push(request.url());
  });
  await page.goto(`${demo.url}/`);
  await expect.poll(() => page.getByTestId('counter-fills').textContent()).toMatch(/^\d+$/);
  await page.getByTestId('herd-n').fill('500');

  await page.getByTestId('herd-unprotected').click();
  await page.locator('[data-testid="result-unprotected"][data-done="1"]').waitFor({ timeout: 30_000 });
  const unprotectedQueries = await number(page, 'result-unprotected-queries');
  expect(await number(page, 'result-unprotected-n')).toBe(500);
  expect(await number(page, 'result-unprotected-fills')).toBe(0);
  expect(unprotectedQueries).toBeGreaterThan(1);

  await page.getByTestId('herd-protected').click();
  await page.locator('[data-testid="result-protected"][data-done="1"]').waitFor({ timeout: 30_000 });
  expect(await number(page, 'result-protected-queries')).toBe(1);
  expect(await number(page, 'result-protected-fills')).toBe(1);
  expect(await number(page, 'result-protected-n')).toBe(500);
  await expect
    .poll(() => page.getByTestId('herd-status').textContent())
    .toMatch(/500 requests, 1 database query, 1 fill/);

  // The live counters catch up within a refresh or two: every query so far was one of the herds'.
  await expect.poll(() => number(page, 'counter-queries'), { timeout: 5_000 }).toBe(unprotectedQueries + 1);
  expect(await number(page, 'counter-fills')).toBe(1);
  expect(await number(page, 'fleet-fills')).toBe(1);
  expect(await page.locator('#chart polyline').count()).toBe(3);
  expect(offsite).toEqual([]);

  await page.waitForTimeout(1_200); // one more refresh, so the chart shows both spikes
  mkdirSync(join(SCREENSHOT, '..'), { recursive: true });
  await page.screenshot({ path: SCREENSHOT });
  await page.close();
});

it('updates the data, survives a database outage with fail-safe, and plots a steady load', async () => {
  if (demo === undefined || browser === undefined) throw new Error('set-up failed');
  const page = await browser.newPage();
  await page.goto(`${demo.url}/`);
  await expect.poll(() => page.getByTestId('counter-fills').textContent()).toMatch(/^\d+$/);

  // Update: a new row, and the page reports every replica (here the one process) serving it.
  const rows = 200_000;
  await page.getByTestId('update').click();
  const update = page.getByTestId('update-status');
  await page.locator('[data-testid="update-status"][data-state="done"]').waitFor({ timeout: 10_000 });
  expect(await update.getAttribute('data-count')).toBe(String(rows + 1));
  expect(await update.textContent()).toMatch(/Count is now 200,001\. Served by every replica/);
  await expect.poll(() => number(page, 'replica-0-serving'), { timeout: 5_000 }).toBe(rows + 1);

  // A good count in the cache, then the outage.
  await page.getByTestId('herd-n').fill('200');
  await page.getByTestId('herd-protected').click();
  await expect.poll(() => page.getByTestId('herd-status').textContent()).toMatch(/^stampede: 200 requests/);
  await page.getByTestId('outage-error').click();
  await expect.poll(() => page.getByTestId('outage-status').getAttribute('data-outage')).toBe('error');
  expect(await page.getByTestId('outage-error').getAttribute('aria-pressed')).toBe('true');

  // Without fail-safe: every request of the herd gets an error.
  await page.getByTestId('herd-protected').click();
  await expect
    .poll(() => page.getByTestId('herd-status').textContent(), { timeout: 30_000 })
    .toMatch(/^stampede: 200 requests, 1 database query, 1 fill, [\d,]+ ms, 200 errors\.$/);
  expect(await page.getByTestId('result-protected').getAttribute('data-errors')).toBe('200');

  // With fail-safe: the last good count for everyone, from one failed attempt.
  await page.getByTestId('failsafe').check();
  await page.getByTestId('herd-protected').click();
  await expect
    .poll(() => page.getByTestId('herd-status').textContent(), { timeout: 30_000 })
    .toMatch(/^stampede \+ fail-safe: 200 requests, 1 database query, 1 fill, [\d,]+ ms, 1 fail-safe\.$/);
  expect(await page.getByTestId('result-protected').getAttribute('data-errors')).toBe('0');
  expect(await page.getByTestId('result-protected-outcome').textContent()).toContain('1 fail-safe');
  await expect.poll(() => number(page, 'counter-failsafe'), { timeout: 5_000 }).toBe(1);
  expect(await number(page, 'counter-dberrors')).toBe(2);
  await page.getByTestId('outage-off').click();
  await expect.poll(() => page.getByTestId('outage-status').getAttribute('data-outage')).toBe('off');
  await page.getByTestId('failsafe').uncheck();

  // Steady load: 3 s at 100 requests/s per variant, every request plotted.
  await page.getByTestId('steady-rate').fill('100');
  await page.getByTestId('steady-seconds').fill('3');
  for (const variant of ['plain', 'swr', 'early']) {
    await page.getByTestId(`steady-${variant}`).click();
    await page.getByTestId(`steady-row-${variant}`).waitFor({ timeout: 20_000 });
    const d = await page.getByTestId(`steady-dots-${variant}`).getAttribute('d');
    expect(d?.match(/M/g)?.length).toBe(300);
    expect(await number(page, `steady-${variant}-errors`)).toBe(0);
  }
  // With a TTL only, the expiry near 2 s makes readers wait for the 100 ms query; early refresh
  // refreshed ahead of it.
  expect(await number(page, 'steady-plain-slow')).toBeGreaterThan(0);
  expect(await number(page, 'steady-plain-max')).toBeGreaterThanOrEqual(50);
  expect(await number(page, 'steady-early-refreshes')).toBeGreaterThanOrEqual(1);

  await page.waitForTimeout(1_200);
  await page.screenshot({ path: SCREENSHOT_FULL, fullPage: true });
  await page.close();
});
