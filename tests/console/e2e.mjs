// End-to-end tests of the `lovia serve` console in headless Chromium,
// driven by Playwright (playwright-core, pinned by package-lock.json).
// tests/all/console.rs starts a real `lovia serve` with scripted models and
// runs this script against it; it prints `ok <name>` or `not ok <name>: <why>`
// per scenario and exits non-zero when any failed.
//
// Environment: LOVIA_URL (the service); ACME_KEY, GLOBEX_KEY, INITECH_KEY
// and HOOLI_KEY (four tenants: acme has the orders plugin and a refund
// script; globex the diagnostics and hostile plugins and a script whose echo
// returns HTML, whose image is not what it says, and which then sleeps;
// initech a refund of a number past what a double holds; hooli a call that
// fails once and is retried, a chart image, a lookup and a refund, and tools
// with nested schemas; UMBRELLA_KEY, a tenant with no plugin but the
// workspace tools, whose script writes hello.py and then runs it, a command
// its coding mode asks about; PIED_KEY, a tenant in code mode whose program
// looks up an order and refunds it); CHROMIUM (the browser executable); SCREENSHOTS (a
// directory).

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const url = `${process.env.LOVIA_URL}/console`;
const ACME = process.env.ACME_KEY;
const GLOBEX = process.env.GLOBEX_KEY;
const INITECH = process.env.INITECH_KEY;
const HOOLI = process.env.HOOLI_KEY;
const UMBRELLA = process.env.UMBRELLA_KEY;
const VANDELAY = process.env.VANDELAY_KEY;
const WAYNE = process.env.WAYNE_KEY;
const PIED = process.env.PIED_KEY;
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
  // The console's own blob: URLs (images it drew from checked bytes) are of its origin too.
  page.on('request', (r) => { if (!r.url().startsWith(process.env.LOVIA_URL) && !r.url().startsWith(`blob:${process.env.LOVIA_URL}/`)) incidents.push(`${name}: request to another origin: ${r.url()}`); });
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
  check(csp.includes("img-src 'self' blob:;"), `images only from the console and blob: URLs: ${csp}`);
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

// The Try form sends what the tool's author meant: an optional string whose
// default is null starts empty and is left out (never the text "null"); the
// argument table says `string | null`, not `union`; grants read as
// `lovia inspect` says them; and a call that asks for approval waits for the
// person at the console, who approves or denies it in the form.
await scenario('try_form_sends_what_the_author_meant', acme, async () => {
  const refund = acme.locator('article[data-tool="refund"]');
  await refund.waitFor({ timeout: WAIT });
  const text = await refund.innerText();
  check(!text.includes('union'), `a type reads "union": ${text.slice(0, 400)}`);
  check(text.includes('string | null'), `reason's type: ${text.slice(0, 400)}`);
  check(/Grants\s+nothing/.test(text), `grants: ${text.slice(0, 400)}`);
  await refund.getByText('Try refund').click();
  check(await refund.getByLabel(/^reason/).inputValue() === '', 'reason is prefilled');
  await refund.getByLabel(/^order_id/).fill('A-1003');
  await refund.getByLabel(/^amount_cents/).fill('100');
  const sent = acme.waitForRequest((r) => r.url().endsWith('/api/tools/refund/call'));
  await refund.getByRole('button', { name: 'Call refund' }).click();
  const body = (await sent).postDataJSON();
  check(same(body, { order_id: 'A-1003', amount_cents: 100 }), `sent ${JSON.stringify(body)}`);
  await refund.locator('.try-output').filter({ hasText: 'Refunded 100 cents on A-1003' }).waitFor({ timeout: WAIT });
  check((await refund.locator('.approval-note').textContent()).includes('waits for your decision'), 'no note before the call');
  await refund.getByLabel(/^order_id/).fill('A-1002');
  await refund.getByLabel(/^amount_cents/).fill('6000');
  await refund.getByRole('button', { name: 'Call refund' }).click();
  await refund.getByRole('button', { name: 'Approve this call' }).click({ timeout: WAIT });
  await refund.locator('.try-output').filter({ hasText: 'Refunded 6000 cents on A-1002' }).waitFor({ timeout: WAIT });
  await refund.getByRole('button', { name: 'Call refund' }).click();
  await refund.getByRole('button', { name: 'Deny this call' }).click({ timeout: WAIT });
  await refund.locator('.error').filter({ hasText: 'Denied: this call asked for approval' }).waitFor({ timeout: WAIT });
  check(await refund.locator('.try-output').textContent() === 'Tool refund was not approved.', 'the model-facing text changed');
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
  check(text.includes('Asked in reply to: Refund A-1002, it arrived damaged'), `no input on the card: ${text}`);
  check(await card.getByRole('button', { name: 'Open run of session refund-1' }).count() === 1, 'no link to the run');
  check(await card.locator('.inexact').count() === 0, 'faithful arguments flagged as inexact');
  await acme.screenshot({ path: join(shots, 'approval-view.png'), fullPage: true });
  // From the keyboard: Tab from the arguments to the "always allow" box,
  // then to Approve, then Enter.
  await card.locator('pre.arguments').focus();
  await acme.keyboard.press('Tab');
  const box = await acme.evaluate(() => document.activeElement && document.activeElement.getAttribute('aria-label'));
  check(box && box.startsWith('Always allow refund in this chat'), `Tab reached ${box}`);
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
  // Opened again once finished: the record says who approved which call and
  // when, and there is no empty timeline; the session list gives the date.
  const row = acme.locator('#sessions tr[data-session="refund-1"]');
  check(/\d{4}|\d+\/\d+\/\d+/.test(await row.innerText()), `no date in the session row: ${await row.innerText()}`);
  await acme.getByRole('button', { name: 'Open session refund-1' }).click();
  const decision = acme.locator('#run-decisions li').filter({ hasText: 'call_refund (refund): approved by API key sha256:' });
  await decision.waitFor({ timeout: WAIT });
  check(await acme.locator('#timeline-heading').isHidden(), 'an empty timeline heading on a finished run');
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
  check(await globex.locator('#waterfall rect.run').count() === 4, 'not four bars');
  // An "image/png" whose bytes are markup never leaves the service as an
  // image: the call fails with the reason, shown as text.
  const mislabelled = globex.locator('#run-events [data-call="call_mislabelled"]');
  const refused = mislabelled.locator('pre.result');
  await refused.waitFor({ timeout: WAIT });
  check((await refused.textContent()).includes("an image's bytes must be the image/png its MIME type says"), `shown: ${await refused.textContent()}`);
  check(await mislabelled.locator('img').count() === 0, 'the mislabelled image was drawn');
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
  check(await later.locator('#waterfall rect.run').count() === 4, 'not four bars');
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

// The Try form streams its call: the tool's progress shows as it comes, and
// a call that runs long is cancelled from the form (DELETE
// /api/tools/calls/{id}); the model-facing text says so.
await scenario('try_form_streams_progress_and_cancels', globex, async () => {
  await globex.getByRole('tab', { name: 'Tools' }).click();
  const steps = globex.locator('article[data-tool="progress"]');
  await steps.getByText('Try progress').click();
  await steps.getByLabel(/^steps/).fill('3');
  await steps.getByRole('button', { name: 'Call progress' }).click();
  await steps.locator('.try-output').filter({ hasText: 'done in 3 steps' }).waitFor({ timeout: WAIT });
  check((await steps.locator('.try-progress').textContent()) === 'step 3 of 3', `progress: ${await steps.locator('.try-progress').textContent()}`);
  const nap = globex.locator('article[data-tool="sleep_ms"]');
  await nap.getByText('Try sleep_ms').click();
  await nap.getByLabel(/^ms/).fill('60000');
  const started = Date.now();
  await nap.getByRole('button', { name: 'Call sleep_ms' }).click();
  await nap.getByRole('button', { name: 'Cancel call' }).click({ timeout: WAIT });
  await nap.locator('.error').filter({ hasText: 'cancelled' }).waitFor({ timeout: WAIT });
  check(Date.now() - started < 20_000, 'the cancel took too long');
  check(await nap.getByRole('button', { name: 'Cancel call' }).isDisabled(), 'Cancel stays enabled after the call');
  await globex.getByRole('tab', { name: 'Runs' }).click();
});

await scenario('metrics', acme, async () => {
  await acme.getByRole('tab', { name: 'Metrics' }).click();
  const calls = acme.locator('[data-metric="Calls"]');
  await calls.waitFor({ timeout: WAIT });
  await acme.waitForFunction(() => Number(document.querySelector('[data-metric="Calls"]').textContent) >= 5, null, { timeout: WAIT });
  check(await acme.locator('#chart-latency rect').count() > 0, 'no latency bars');
  const buckets = await acme.locator('#chart-latency svg').getAttribute('aria-label');
  check(buckets.includes(' ms:') && !/≤ 0\./.test(buckets), `latency buckets in seconds: ${buckets}`);
  // The calls-per-minute line is the service's series: a point every 10 s over 10 minutes.
  const points = (await acme.locator('#chart-rate polyline.calls').getAttribute('points')).trim().split(/\s+/);
  check(points.length === 60, `${points.length} points on the calls-per-minute line`);
  const rate = await (await fetch(`${process.env.LOVIA_URL}/api/metrics`, { headers: { Authorization: `Bearer ${ACME}` } })).json();
  const shownRate = Number(await acme.locator('[data-metric="Calls in the last minute"]').textContent());
  check(shownRate > 0 && Math.abs(shownRate - rate.calls_per_minute.last_minute) <= 2, `shown ${shownRate}, service ${rate.calls_per_minute.last_minute}`);
  const tools = await acme.locator('#metrics-tools').innerText();
  check(tools.includes('refund') && !tools.includes('echo') && !tools.includes('sleep_ms'), `by tool: ${tools}`);
  // The tenant's audit trail: its configured plugins' loads at start, and no other tenant's.
  await acme.locator('#audit tr').first().waitFor({ timeout: WAIT });
  const audit = await acme.locator('#audit').innerText();
  check(audit.includes('orders.wasm') && audit.includes('sha256:') && /\bok\b/.test(audit), `audit: ${audit}`);
  check(!audit.includes('hostile'), `another tenant's plugin in acme's audit: ${audit}`);
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

// hooli: one run with a call that fails once and is retried, a chart image,
// a lookup beside them, then a refund approved in the run view.
const hooli = await newPage('hooli');
const CHART = { values: [3, 1, 4, 1, 5, 9, 2, 6], label: 'orders' };
await scenario('retries_and_images', hooli, async () => {
  await signIn(hooli, HOOLI);
  await startRun(hooli, 'chart-1', 'Chart the orders, then refund A-1002');
  const flaky = hooli.locator('#run-events [data-call="call_flaky"]');
  await flaky.locator('pre.result').filter({ hasText: 'answered on attempt 2' }).waitFor({ timeout: WAIT });
  const note = await flaky.locator('p.attempt').innerText();
  check(note === 'attempt 1 failed: upstream unavailable (503), attempt 1; retrying in 100 ms', `note under the call: ${note}`);
  // The failed attempt's bar ends before the retry's bar starts, on the same row (read in one go: a redraw rescales).
  const bars = await hooli.locator('#waterfall svg').evaluate((chart) => {
    const box = (r) => { const b = r.getBoundingClientRect(); return { x: b.x, y: b.y, width: b.width, title: r.textContent }; };
    return { attempts: [...chart.querySelectorAll('rect.attempt')].map(box), runs: [...chart.querySelectorAll('rect.run')].map(box) };
  });
  check(bars.attempts.length === 1, `${bars.attempts.length} bars for failed attempts`);
  const [attempt] = bars.attempts;
  const retry = bars.runs.find((r) => r.title.startsWith('fail_first'));
  check(retry && Math.abs(retry.y - attempt.y) < 1 && retry.x >= attempt.x + attempt.width - 0.5, `bars: ${JSON.stringify(bars)}`);
  check(retry.title.includes('last attempt'), `retry bar: ${retry.title}`);

  // The chart: drawn from a blob: URL, at the size its PNG header says.
  const img = hooli.locator('#run-events [data-call="call_chart"] .part-image img');
  await img.waitFor({ timeout: WAIT });
  check((await img.getAttribute('src')).startsWith('blob:'), 'the image is not a blob: URL');
  await hooli.waitForFunction((i) => i.complete && i.naturalWidth > 0, await img.elementHandle(), { timeout: WAIT });
  const drawn = await img.evaluate((i) => [i.naturalWidth, i.naturalHeight]);
  const answer = await (await fetch(`${process.env.LOVIA_URL}/api/tools/bar_chart/call`, {
    method: 'POST', headers: { Authorization: `Bearer ${HOOLI}`, 'Content-Type': 'application/json' }, body: JSON.stringify(CHART),
  })).json();
  const png = Buffer.from(answer.parts.find((p) => p.type === 'image').data, 'base64');
  const header = [png.readUInt32BE(16), png.readUInt32BE(20)];
  check(drawn[0] === header[0] && drawn[1] === header[1], `drawn ${drawn}, the PNG says ${header}`);
  const caption = await hooli.locator('#run-events [data-call="call_chart"] .part-image figcaption').textContent();
  check(caption === `[image: image/png, ${(png.length / 1024).toFixed(1)} KB]`, `caption: ${caption}`);
  check((await img.getAttribute('alt')) === caption, 'the image has no text alternative');
  check((await hooli.locator('#run-events [data-call="call_chart"] .part-text').textContent()).startsWith('8 bars of orders'), 'no text part');

  // The refund waits for an approval in the run view; approved there, from the keyboard.
  const approve = hooli.getByRole('button', { name: 'Approve refund (call_refund) in this run' });
  await approve.focus();
  await hooli.keyboard.press('Enter');
  await hooli.locator('#run-events').getByText('Refunded 9000 cents on A-1002').waitFor({ timeout: WAIT });
  await hooli.locator('#run-status').filter({ hasText: 'completed' }).waitFor({ timeout: WAIT });
  check(await hooli.locator('#waterfall rect.run').count() === 4, 'not four bars');
  check(await hooli.locator('#waterfall rect.wait').count() === 1, 'no approval wait on the waterfall');
  await hooli.locator('#run-events [data-call="call_chart"]').scrollIntoViewIfNeeded();
});

/** Objects compared whatever the order of their keys. */
function same(a, b) {
  const canon = (v) => (Array.isArray(v) ? v.map(canon) : v && typeof v === 'object'
    ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])])) : v);
  return JSON.stringify(canon(a)) === JSON.stringify(canon(b));
}

await scenario('nested_form', hooli, async () => {
  await hooli.getByRole('tab', { name: 'Tools' }).click();
  // search_docs: an optional object argument is a fieldset of its own fields.
  const docs = hooli.locator('article[data-tool="search_docs"]');
  await docs.waitFor({ timeout: WAIT });
  await docs.getByText('Try search_docs').click();
  await docs.getByLabel(/^query/).fill('timeouts webassembly');
  // A strict tool: every argument is required, the optional ones may be null.
  const filter = docs.getByRole('group', { name: 'filter', exact: true });
  await filter.getByLabel(/^section/).selectOption('"faq"');
  await filter.getByLabel(/^since_year/).fill('2026');
  let sent = hooli.waitForRequest((r) => r.url().endsWith('/api/tools/search_docs/call'));
  await docs.getByRole('button', { name: 'Call search_docs' }).click();
  let body = (await sent).postDataJSON();
  check(same(body, { query: 'timeouts webassembly', limit: 5, filter: { section: 'faq', since_year: 2026 } }), `sent ${JSON.stringify(body)}`);
  await docs.locator('.try-output').filter({ hasText: 'Timeouts' }).waitFor({ timeout: WAIT });
  check(!(await docs.locator('.try-output').textContent()).includes('WebAssembly'), 'the filter did not reach the tool');

  // nested: an object, and an array of objects whose items are added and removed.
  const nested = hooli.locator('article[data-tool="nested"]');
  await nested.getByText('Try nested').click();
  await nested.getByLabel(/^only/).selectOption('"only"');
  const point = nested.getByRole('group', { name: 'point (required)', exact: true });
  await point.getByLabel(/^x/).fill('1.5');
  await point.getByLabel(/^y/).fill('-2');
  await point.getByLabel(/^tags/).fill('["a"]');
  await point.getByLabel(/^rank/).fill('3');
  const points = nested.getByRole('group', { name: 'points (required)', exact: true });
  for (let i = 1; i <= 3; i += 1) {
    await points.getByRole('button', { name: 'Add points item' }).click();
    const item = points.getByRole('group', { name: `points item ${i}`, exact: true });
    await item.getByLabel(/^x/).fill(String(i * 10));
    await item.getByLabel(/^y/).fill('0');
    await item.getByLabel(/^tags/).fill('[]');
    await item.getByLabel(/^rank/).fill(String(i));
  }
  await points.getByRole('button', { name: 'Remove points item 2' }).click();
  const legends = await points.locator('ol.items legend').allTextContents();
  check(same(legends, ['points item 1', 'points item 2']), `items after a removal: ${legends}`);
  // Every control of every form has a label.
  const unlabelled = await hooli.locator('#tools').evaluate((root) => [...root.querySelectorAll('input, select, textarea')]
    .filter((c) => c.labels.length === 0).map((c) => c.id));
  check(unlabelled.length === 0, `controls without a label: ${unlabelled}`);
  sent = hooli.waitForRequest((r) => r.url().endsWith('/api/tools/nested/call'));
  await nested.getByRole('button', { name: 'Call nested' }).click();
  body = (await sent).postDataJSON();
  const expected = { order: 'asc', only: 'only', point: { x: 1.5, y: -2, tags: ['a'], rank: 3 },
    points: [{ x: 10, y: 0, tags: [], rank: 1 }, { x: 30, y: 0, tags: [], rank: 3 }] };
  check(same(body, expected), `sent ${JSON.stringify(body)}`);
  await nested.locator('.try-output').filter({ hasText: /^2$/ }).waitFor({ timeout: WAIT });
  await nested.scrollIntoViewIfNeeded();
});
await hooli.context().close();

// umbrella: a workspace command asks, the console shows it like any
// other approval, and once approved it runs (confined) in the session's root.
const umbrella = await newPage('umbrella');
await scenario('approve_a_workspace_command', umbrella, async () => {
  await signIn(umbrella, UMBRELLA);
  await startRun(umbrella, 'ws-1', 'Write hello.py and run it');
  await umbrella.locator('#run-events').getByText('created hello.py (31 bytes)').waitFor({ timeout: WAIT });
  await umbrella.getByRole('tab', { name: /Approvals/ }).click();
  const card = umbrella.locator('li.approval[data-session="ws-1"]');
  await card.waitFor({ timeout: WAIT });
  const text = await card.innerText();
  check(text.includes('"command": "python3 hello.py"'), `the command is not shown: ${text}`);
  check(text.includes('(host tool)'), `a workspace tool shown as a plugin's: ${text}`);
  await card.getByRole('button', { name: /^Approve shell/ }).click();
  await card.waitFor({ state: 'detached', timeout: WAIT });
  await umbrella.getByRole('tab', { name: 'Runs' }).click();
  // The result exactly as the model gets it: the exit code, then stdout.
  await umbrella.locator('#run-events').getByText(/^exit code: 0\s+hi from the workspace$/).waitFor({ timeout: WAIT });
  await umbrella.locator('#run-status').filter({ hasText: 'completed' }).waitFor({ timeout: WAIT });
  check(await umbrella.locator('#run-events .decision').filter({ hasText: 'approved' }).count() === 1, 'the inline approval is not settled');
});
await umbrella.context().close();

// pied: code mode. The model's program looks up an order and refunds it;
// the console shows the program's calls under it, the refund's approval
// among them, approved there, and the program's result.
const pied = await newPage('pied');
await scenario('code_mode_program', pied, async () => {
  await signIn(pied, PIED);
  await startRun(pied, 'code-1', 'Refund A-1002 in code');
  const program = pied.locator('#run-events [data-call="p1"]');
  await program.waitFor({ timeout: WAIT });
  const approve = pied.getByRole('button', { name: 'Approve refund (p1/2) in this run' });
  await approve.waitFor({ timeout: WAIT });
  check(await program.locator('.nested-calls').getByRole('button', { name: 'Approve refund (p1/2) in this run' }).count() === 1,
    'the approval is not shown under its program');
  check(await program.locator('.nested-calls [data-call="p1/1"]').count() === 1, 'the lookup is not shown under its program');
  await approve.click();
  await pied.locator('#run-status').filter({ hasText: 'completed' }).waitFor({ timeout: WAIT });
  const result = await program.locator(':scope > .call-result').innerText();
  check(result.includes('Refunded 6000 cents on A-1002'), `the program's result: ${result}`);
  check(await program.locator('.nested-calls [data-call="p1/2"]').count() === 1, 'the refund is not shown under its program');
});
await pied.context().close();

// vandelay: the agent asks a question; the console shows it as a card with
// a button per option, and the answer reaches the model.
const vandelay = await newPage('vandelay');
await scenario('answer_a_question', vandelay, async () => {
  await signIn(vandelay, VANDELAY);
  await startRun(vandelay, 'ask-1', 'Make me a drink');
  await vandelay.locator('#run-events').getByText('Tea or coffee? (call_ask)').waitFor({ timeout: WAIT });
  await vandelay.getByRole('tab', { name: /Approvals/ }).click();
  const card = vandelay.locator('li.question[data-session="ask-1"]');
  await card.waitFor({ timeout: WAIT });
  check((await card.innerText()).includes('Tea or coffee?'), 'the question is not shown');
  check((await card.innerText()).includes('green'), `an option's description is not on the card: ${await card.innerText()}`);
  await card.getByRole('button', { name: 'Answer Tea' }).click();
  await card.waitFor({ state: 'detached', timeout: WAIT });
  await vandelay.getByRole('tab', { name: 'Runs' }).click();
  await vandelay.locator('#run-status').filter({ hasText: 'completed' }).waitFor({ timeout: WAIT });
  await vandelay.locator('#run-events').getByText(/^Tea$/).waitFor({ timeout: WAIT });
});
await vandelay.context().close();

// wayne: "Always allow refund in this chat" on the first refund's card
// approves the second without a card, and the run view says so.
const wayne = await newPage('wayne');
await scenario('always_allow_a_tool_in_a_chat', wayne, async () => {
  await signIn(wayne, WAYNE);
  await startRun(wayne, 'always-1', 'Refund twice');
  await wayne.getByRole('tab', { name: /Approvals/ }).click();
  const card = wayne.locator('li.approval[data-session="always-1"]');
  await card.waitFor({ timeout: WAIT });
  await card.getByLabel('Always allow refund in this chat').check();
  await card.getByRole('button', { name: /^Approve refund/ }).click();
  await card.waitFor({ state: 'detached', timeout: WAIT });
  await wayne.getByRole('tab', { name: 'Runs' }).click();
  await wayne.locator('#run-status').filter({ hasText: 'completed' }).waitFor({ timeout: WAIT });
  await wayne.locator('#run-events').getByText('✓ refund auto-approved (allowed for this chat)').waitFor({ timeout: WAIT });
  check(await wayne.locator('li.approval').count() === 0, 'the second refund was shown for approval');
});
await wayne.context().close();

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
