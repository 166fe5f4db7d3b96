// End-to-end tests of the `lovia serve` console in headless Chromium,
// driven by Playwright (playwright-core, pinned by package-lock.json).
// tests/all/console.rs starts a real `lovia serve` with scripted models and
// runs this script against it; it prints `ok <name>` or `not ok <name>: <why>`
// per scenario and exits non-zero when any failed.
//
// Environment: LOVIA_URL (the service), ACME_KEY and GLOBEX_KEY (two
// tenants: acme has the orders plugin and a refund script, globex the
// diagnostics plugin and a script whose echo returns HTML and then sleeps),
// CHROMIUM (the browser executable), SCREENSHOTS (a directory).

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const url = `${process.env.LOVIA_URL}/console`;
const ACME = process.env.ACME_KEY;
const GLOBEX = process.env.GLOBEX_KEY;
const INITECH = process.env.INITECH_KEY;
const shots = process.env.SCREENSHOTS;
mkdirSync(shots, { recursive: true });

const HOSTILE = '<img src=x onerror=alert(1)>';
// Generous: the machine running CI is shared and small.
const WAIT = 30_000;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

// Anything that would mean script ran or the policy was broken: a dialog
// (alert), a page error, a console error (CSP violations are reported there).
const incidents = [];
async function newPage(name) {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  page.on('dialog', async (d) => { incidents.push(`${name}: a ${d.type()} dialog opened: ${d.message()}`); await d.dismiss(); });
  page.on('pageerror', (e) => incidents.push(`${name}: page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') incidents.push(`${name}: console error: ${m.text()}`); });
  page.on('response', (r) => { if (r.status() >= 400 && r.status() !== 401) incidents.push(`${name}: ${r.status()} for ${r.url()}`); });
  page.on('request', (r) => { if (!r.url().startsWith(process.env.LOVIA_URL)) incidents.push(`${name}: request to another origin: ${r.url()}`); });
  return page;
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

let failed = 0;
async function scenario(name, page, body) {
  const started = Date.now();
  try {
    await body();
    console.log(`ok ${name} (${Date.now() - started} ms)`);
  } catch (e) {
    failed += 1;
    console.log(`not ok ${name}: ${String(e.message).split('\n')[0]}`);
  } finally {
    await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true }).catch(() => {});
  }
}

async function signIn(page, key) {
  await page.goto(url);
  await page.getByLabel('Tenant API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#who').filter({ hasText: 'Signed in' }).waitFor({ timeout: WAIT });
}

async function startRun(page, session, input) {
  await page.getByRole('tab', { name: 'Runs' }).click();
  await page.getByLabel('Session id (empty: a new session)').fill(session);
  await page.getByLabel('Message', { exact: true }).fill(input);
  await page.getByRole('button', { name: 'Start run' }).click();
}

const acme = await newPage('acme');
const globex = await newPage('globex');

await scenario('sign_in', acme, async () => {
  const response = await acme.goto(url);
  const csp = response.headers()['content-security-policy'] || '';
  check(csp.includes("default-src 'self'") && csp.includes("frame-ancestors 'none'") && !csp.includes('unsafe'), `CSP: ${csp}`);
  check(response.headers()['x-content-type-options'] === 'nosniff', 'no nosniff');
  await acme.getByLabel('Tenant API key').fill('not-a-key');
  await acme.getByRole('button', { name: 'Sign in' }).click();
  await acme.locator('#sign-in-error').filter({ hasText: 'refused' }).waitFor({ timeout: WAIT });
  await signIn(acme, ACME);
  await acme.locator('#who').filter({ hasText: 'Signed in as acme' }).waitFor({ timeout: WAIT });
  check(!acme.url().includes(ACME), 'the key is in the URL');
  const stored = await acme.evaluate(() => sessionStorage.getItem('lovia.console.key'));
  check(stored === ACME, 'the key is not in session storage');
  const local = await acme.evaluate(() => localStorage.length);
  check(local === 0, 'something went to local storage');
});

await scenario('tools', acme, async () => {
  await acme.getByRole('tab', { name: 'Tools' }).click();
  const refund = acme.locator('article[data-tool="refund"]');
  await refund.waitFor({ timeout: WAIT });
  const text = await refund.innerText();
  check(/[0-9a-f]{64}/.test(text), 'no plugin digest on refund');
  check(text.includes('destructive') && text.includes('approval: ask plugin'), `hints missing: ${text.slice(0, 300)}`);
  check(text.includes('order_id') && text.includes('amount_cents'), 'schema arguments missing');
  // The form generated from lookup_order's schema makes a real call.
  const lookup = acme.locator('article[data-tool="lookup_order"]');
  await lookup.getByText('Try lookup_order').click();
  await lookup.getByLabel(/^order_id/).fill('A-1002');
  await lookup.getByRole('button', { name: 'Call lookup_order' }).click();
  await lookup.locator('.try-output').filter({ hasText: 'A-1002' }).waitFor({ timeout: WAIT });
});

await scenario('approve_in_the_console', acme, async () => {
  await startRun(acme, 'refund-1', 'Refund A-1002, it arrived damaged');
  await acme.locator('#run-events .inline-approval').waitFor({ timeout: WAIT });
  await acme.getByRole('tab', { name: /Approvals/ }).click();
  const card = acme.locator('li.approval[data-session="refund-1"]');
  await card.waitFor({ timeout: WAIT });
  const text = await card.innerText();
  check(text.includes('"amount_cents": 9000'), `arguments not pretty-printed: ${text}`);
  check(/[0-9a-f]{64}/.test(text), 'no digest');
  check(/Denied in\s*\d+/.test(text), 'no deadline');
  check(await card.locator('.inexact').count() === 0, 'faithful arguments flagged as inexact');
  await acme.screenshot({ path: join(shots, 'approval-view.png'), fullPage: true });
  // From the keyboard: Tab from the arguments to Approve, then Enter.
  await card.locator('pre.arguments').focus();
  await acme.keyboard.press('Tab');
  const focused = await acme.evaluate(() => document.activeElement && document.activeElement.getAttribute('aria-label'));
  check(focused && focused.startsWith('Approve refund'), `Tab reached ${focused}`);
  await acme.keyboard.press('Enter');
  await card.waitFor({ state: 'detached', timeout: WAIT });
  await acme.getByRole('tab', { name: 'Runs' }).click();
  await acme.locator('#run-events').getByText('Refunded 9000 cents on A-1002').waitFor({ timeout: WAIT });
  await acme.locator('#run-status').filter({ hasText: 'completed' }).waitFor({ timeout: WAIT });
  const bars = await acme.locator('#waterfall rect.run').count();
  check(bars === 2, `waterfall bars: ${bars}`);
  check(await acme.locator('#waterfall rect.wait').count() === 1, 'no approval wait on the waterfall');
  check(await acme.locator('#run-events .decision').filter({ hasText: 'approved' }).count() === 1, 'the inline approval is not settled');
  check(await acme.locator('#run-events .inline-approval button').count() === 0, 'approve/deny buttons stayed');
  await acme.screenshot({ path: join(shots, 'run-view.png'), fullPage: true });
});

await scenario('deny_in_the_console', acme, async () => {
  await startRun(acme, 'refund-2', 'Refund A-1002 again');
  await acme.getByRole('tab', { name: /Approvals/ }).click();
  const card = acme.locator('li.approval[data-session="refund-2"]');
  await card.waitFor({ timeout: WAIT });
  await card.getByRole('button', { name: /^Deny refund/ }).focus();
  await acme.keyboard.press('Space');
  await card.waitFor({ state: 'detached', timeout: WAIT });
  await acme.getByRole('tab', { name: 'Runs' }).click();
  await acme.locator('#run-events').getByText('Tool refund was not approved.').waitFor({ timeout: WAIT });
  await acme.locator('#run-events .decision').filter({ hasText: 'denied' }).waitFor({ timeout: WAIT });
});

await scenario('tenants_see_only_their_own', globex, async () => {
  // acme has a refund waiting while globex looks.
  await startRun(acme, 'refund-3', 'Refund A-1002 a third time');
  await acme.getByRole('tab', { name: /Approvals/ }).click();
  await acme.locator('li.approval[data-session="refund-3"]').waitFor({ timeout: WAIT });
  await signIn(globex, GLOBEX);
  // Two refreshes of globex's lists (1 s and 2 s apart) have come and gone.
  await globex.waitForTimeout(2500);
  check(await globex.locator('li.approval').count() === 0, 'globex sees an approval');
  check(await globex.locator('#approvals-empty').isVisible(), 'no empty note');
  await globex.getByRole('tab', { name: 'Runs' }).click();
  const sessions = await globex.locator('#sessions').innerText();
  check(!sessions.includes('refund-'), `globex sees acme's sessions: ${sessions}`);
  await globex.getByRole('tab', { name: 'Tools' }).click();
  await globex.locator('article[data-tool="echo"]').waitFor({ timeout: WAIT });
  check(await globex.locator('article[data-tool="refund"]').count() === 0, "globex sees acme's tools");
  await globex.getByRole('tab', { name: /Approvals/ }).click();
});

await scenario('hostile_output_is_text', globex, async () => {
  await startRun(globex, 'hostile-1', 'echo something');
  const result = globex.locator('#run-events [data-call="call_echo"] pre.result');
  await result.waitFor({ timeout: WAIT });
  check(await result.textContent() === HOSTILE, `shown: ${await result.textContent()}`);
  check(await globex.locator('#run-events img, #app img').count() === 0, 'an <img> element was made');
  // Progress messages land under their call, and parallel calls overlap on the waterfall.
  await globex.locator('#run-events [data-call="call_progress"] .progress').nth(2).waitFor({ timeout: WAIT });
  check((await globex.locator('#run-events [data-call="call_progress"]').innerText()).includes('step 3 of 3'), 'no progress');
  check(await globex.locator('#waterfall rect.run').count() === 3, 'not three bars');
  // The echo in the tool's form too.
  await globex.getByRole('tab', { name: 'Tools' }).click();
  const echo = globex.locator('article[data-tool="echo"]');
  await echo.getByText('Try echo').click();
  await echo.getByLabel(/^text/).fill(HOSTILE);
  await echo.getByRole('button', { name: 'Call echo' }).click();
  await echo.locator('.try-output').filter({ hasText: 'onerror' }).waitFor({ timeout: WAIT });
  check(await echo.locator('.try-output').textContent() === HOSTILE, 'the form output differs');
  check(await globex.locator('img').count() === 0, 'an <img> element was made');
  await globex.waitForTimeout(500);
  check(!incidents.some((i) => i.includes('dialog')), incidents.join('; '));
  await globex.getByRole('tab', { name: 'Runs' }).click();
});

// A second tab of globex opens hostile-1 while it sleeps: the service
// replays the run's events so far, so the earlier calls are there, once.
const later = await newPage('globex-later');
await scenario('open_a_running_run', later, async () => {
  await signIn(later, GLOBEX);
  await later.getByRole('tab', { name: 'Runs' }).click();
  await later.getByRole('button', { name: 'Open session hostile-1' }).click();
  const result = later.locator('#run-events [data-call="call_echo"] pre.result');
  await result.waitFor({ timeout: WAIT });
  check(await result.textContent() === HOSTILE, `shown: ${await result.textContent()}`);
  check(await later.locator('#run-events [data-call="call_echo"]').count() === 1, 'the echo is shown more than once');
  check((await later.locator('#run-events [data-call="call_progress"]').innerText()).includes('step 3 of 3'), 'no earlier progress');
  await later.locator('#run-events [data-call="call_sleep"]').filter({ hasText: 'running' }).waitFor({ timeout: WAIT });
  check(await later.locator('#run-events .event-user').count() === 1, 'the input is not shown once');
  check(await later.locator('#waterfall rect.run').count() === 3, 'not three bars');
  check(await later.locator('#run-events img').count() === 0, 'an <img> element was made');
});
await later.context().close();

await scenario('cancel_a_sleeping_run', globex, async () => {
  // hostile-1 is still in its 60 s sleep_ms call.
  const sleep = globex.locator('#run-events [data-call="call_sleep"]');
  await sleep.waitFor({ timeout: WAIT });
  check((await sleep.innerText()).includes('running'), 'the sleep is not running');
  const started = Date.now();
  await globex.getByRole('button', { name: 'Cancel run' }).click();
  await globex.locator('#run-status').filter({ hasText: 'cancelled' }).waitFor({ timeout: WAIT });
  check(Date.now() - started < 20_000, 'the cancel took too long');
  await globex.locator('#sessions tr[data-session="hostile-1"] .status-cancelled').waitFor({ timeout: WAIT });
});

await scenario('metrics', acme, async () => {
  await acme.getByRole('tab', { name: 'Metrics' }).click();
  const calls = acme.locator('[data-metric="Calls"]');
  await calls.waitFor({ timeout: WAIT });
  await acme.waitForFunction(() => Number(document.querySelector('[data-metric="Calls"]').textContent) >= 5, null, { timeout: WAIT });
  check(await acme.locator('#chart-latency rect').count() > 0, 'no latency bars');
  const tools = await acme.locator('#metrics-tools').innerText();
  check(tools.includes('refund') && !tools.includes('echo') && !tools.includes('sleep_ms'), `by tool: ${tools}`);
});

await scenario('exact_arguments_are_shown', globex, async () => {
  // In a fresh tab: initech's model asks to refund 9007199254740993 cents,
  // which JSON.parse would turn into ...992.
  const initech = await newPage('initech');
  try {
    await signIn(initech, INITECH);
    await startRun(initech, 'huge-1', 'refund a lot');
    await initech.getByRole('tab', { name: /Approvals/ }).click();
    const card = initech.locator('li.approval[data-session="huge-1"]');
    await card.waitFor({ timeout: WAIT });
    check(await card.locator('.inexact').isVisible(), 'the pretty view is not flagged');
    check((await card.locator('pre.arguments-exact').textContent()).includes('9007199254740993'), 'the exact amount is not shown');
    check(await acme.locator('li.approval[data-session="huge-1"]').count() === 0, 'acme sees initech\'s approval');
    await initech.screenshot({ path: join(shots, 'exact-arguments.png'), fullPage: true });
    await card.getByRole('button', { name: /^Deny refund/ }).click();
    await card.waitFor({ state: 'detached', timeout: WAIT });
    await initech.getByRole('tab', { name: 'Runs' }).click();
    await initech.locator('#run-events').getByText('Tool refund was not approved.').waitFor({ timeout: WAIT });
  } finally {
    await initech.context().close();
  }
});

await scenario('sign_out', acme, async () => {
  await acme.getByRole('button', { name: 'Sign out' }).click();
  await acme.getByLabel('Tenant API key').waitFor({ timeout: WAIT });
  check(await acme.evaluate(() => sessionStorage.length) === 0, 'the key stayed in session storage');
  check(await acme.locator('li.approval').count() === 0, 'approvals stayed on screen');
});

const unexpected = incidents.filter((i) => !i.includes('401'));
if (unexpected.length) {
  failed += 1;
  console.log(`not ok no_incidents: ${unexpected.join('; ')}`);
} else {
  console.log('ok no_incidents');
}
await browser.close();
console.log(failed ? `console e2e: ${failed} failed` : 'console e2e: all passed');
process.exit(failed ? 1 : 0);
