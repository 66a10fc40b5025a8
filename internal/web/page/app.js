// The web page of agentd: the same live sessions as `agentd attach`, over
// the host's WebSocket. Everything a session holds (prompts, replies, tool
// output, terminal screens) is data: it reaches the page as text nodes,
// never as markup.
'use strict';

const TOKEN_KEY = 'agentd.token';
const LEVEL_KEY = 'agentd.level';
const FOLD_LINES = 12; // output longer than this many lines is folded
const FOLD_CHARS = 1500; // or this many characters
const PAGE_BYTES = 393216; // the most a transcript page may hold
const RUN_KEEP = 262144; // the most of a shell run's output the page keeps shown

const $ = (id) => document.getElementById(id);

// el makes an element of tag with class cls and, when given, text as its
// one text node.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function button(label, cls, onClick) {
  const b = el('button', cls, label);
  b.type = 'button';
  b.addEventListener('click', onClick);
  return b;
}

const page = {
  ws: null,
  nextRequest: 1,
  pending: new Map(), // requestId: {resolve, reject}
  principal: null,
  connectionId: '', // this page's connection, as the host names it
  hostEpoch: '',
  listSub: null, // the subscription to the session list
  listLoading: false,
  listStale: false, // a change came while the list was read: read it again
  ended: false, // access ended or the host shut down: no more dialing
  retryMs: 250,
  sessions: [],
  cur: null, // the session shown, or null for the list
};

// ---- Authentication -------------------------------------------------------

// takeToken moves a token given in the URL (#token=…) out of it at once, and
// keeps it in this tab's sessionStorage, so that the tab can log in again
// after a host hand-off.
function takeToken() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get('token');
  if (!token) return null;
  history.replaceState(null, '', location.pathname + location.search);
  sessionStorage.setItem(TOKEN_KEY, token);
  const level = params.get('level');
  if (level) sessionStorage.setItem(LEVEL_KEY, level);
  else sessionStorage.removeItem(LEVEL_KEY);
  return token;
}

// login exchanges the token for the listener's HttpOnly cookie; it
// returns the answer's status. A host handing over to a new one answers
// 503 and the new one may not listen yet: the login is tried again until
// a host answers it, so that it is made, and recorded, at the new one.
async function login(token) {
  let wait = 100;
  for (let i = 0; ; i++) {
    let status = 0;
    try {
      const r = await fetch('/login', { method: 'POST', headers: { Authorization: 'Bearer ' + token }, credentials: 'same-origin' });
      status = r.status;
    } catch (e) {
      status = 0; // no host answered
    }
    if ((status !== 0 && status !== 503 && status !== 429) || i === 20) return status;
    await new Promise((resolve) => setTimeout(resolve, wait));
    wait = Math.min(wait * 2, 2000);
  }
}

// ---- The connection -------------------------------------------------------

function setConn(state, text) {
  const c = $('conn');
  c.dataset.state = state;
  c.textContent = text || state;
}

function notice(text) {
  const n = $('notice');
  n.hidden = !text;
  n.textContent = text || '';
}

function connect() {
  if (page.ended) return;
  setConn('connecting');
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
  page.ws = ws;
  let opened = false;
  let buf = '';
  ws.onopen = () => {
    opened = true;
    ws.send(JSON.stringify({
      kind: 'hello', clientInstanceId: 'web-' + Math.random().toString(36).slice(2, 10),
      protocolMin: 1, protocolMax: 1, compatibilityEpoch: 1, compositionId: 'agentd.interactive', surface: 'web',
    }) + '\n');
  };
  ws.onmessage = (ev) => {
    buf += ev.data;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line) onFrame(JSON.parse(line));
    }
  };
  ws.onclose = () => {
    if (page.ws !== ws) return;
    page.ws = null;
    for (const p of page.pending.values()) p.reject(new Error('the connection closed'));
    page.pending.clear();
    page.listSub = null;
    if (page.cur) {
      page.cur.subId = null;
      if (page.cur.pty) {
        page.cur.pty.controllerId = null; // control ends with the connection
        ptyWho(page.cur.pty);
      }
    }
    if (page.ended) return;
    setConn('offline', 'reconnecting');
    const wait = page.retryMs;
    page.retryMs = Math.min(page.retryMs * 2, 4000);
    setTimeout(() => reconnect(opened), wait);
  };
}

// reconnect dials again; a tab whose cookie the host no longer knows (a
// new host took over) logs in again with the token it kept.
async function reconnect(wasOpen) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!wasOpen && token && (await login(token)) === 401) {
    endAccess('This link no longer gives access: it was revoked or has expired.');
    return;
  }
  if (!wasOpen && !token && !page.principal) {
    notice('This page is not logged in: its link was used already, revoked or has expired. agentd web and agentd share print new ones.');
  }
  connect();
}

function endAccess(text) {
  page.ended = true;
  sessionStorage.removeItem(TOKEN_KEY);
  setConn('ended', 'ended');
  notice(text);
  page.sessions = [];
  renderList();
  if (page.cur) leaveSession(false);
  if (page.ws) page.ws.close();
}

function call(operation, input) {
  return new Promise((resolve, reject) => {
    if (!page.ws || page.ws.readyState !== WebSocket.OPEN) {
      reject(new Error('not connected'));
      return;
    }
    const requestId = 'r' + page.nextRequest++;
    page.pending.set(requestId, { resolve, reject });
    page.ws.send(JSON.stringify({ requestId, operation, input: input || {} }) + '\n');
  });
}

function onFrame(f) {
  switch (f.kind) {
    case undefined: {
      const p = page.pending.get(f.requestId);
      if (!p) return;
      page.pending.delete(f.requestId);
      if (f.ok) p.resolve(f.result);
      else p.reject(Object.assign(new Error(f.error.message), { code: f.error.code }));
      return;
    }
    case 'accepted':
      onAccepted(f);
      return;
    case 'incompatible':
    case 'refused':
      notice('The host refused this page: ' + f.reason);
      return;
    case 'subscription.session_delta':
      if (page.cur && f.subscriptionId === page.cur.subId) {
        const follow = atEnd();
        applyDelta(f.delta);
        if (follow) scrollToEnd();
      }
      return;
    case 'subscription.runtime_resource_update':
      if (page.cur && f.subscriptionId === page.cur.subId) resourceChanged(f.resource);
      return;
    case 'subscription.session_list_update':
      if (f.subscriptionId === page.listSub) listChanged(f);
      return;
    case 'subscription.runtime_resource_pty_data':
      if (page.cur && f.subscriptionId === page.cur.subId) ptyData(f);
      return;
    case 'subscription.closed':
      if (f.subscriptionId === page.listSub) page.listSub = null; // a new connection opens it again
      if (page.cur && f.subscriptionId === page.cur.subId) onClosed(f.reason);
      return;
  }
}

function onAccepted(f) {
  page.principal = f.principal;
  page.connectionId = f.connectionId;
  page.hostEpoch = f.hostEpoch;
  page.retryMs = 250;
  if (f.principal.kind !== 'guest') {
    sessionStorage.removeItem(TOKEN_KEY); // the owner's login token is spent
    sessionStorage.removeItem(LEVEL_KEY);
  }
  setConn('live', 'live');
  notice('');
  watchList();
  if (page.cur) openSubscription();
}

function onClosed(reason) {
  page.cur.subId = null;
  switch (reason) {
    case 'access_revoked':
      endAccess('Access to this session ended: its link was revoked or has expired.');
      return;
    case 'session_removed':
      leaveSession(true);
      notice('The session was archived or removed.');
      return;
    case 'host_draining':
      page.ended = true;
      setConn('ended', 'host stopped');
      notice('The host shut down. Start it again, then reload this page.');
      return;
    case 'host_replaced':
      return; // the connection closes next: reconnecting resumes
    default: // slow_consumer, worker_exited: open again from the last record
      openSubscription();
  }
}

// atEnd reports whether the page is scrolled to (about) its end, where
// it follows what comes.
function atEnd() {
  return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80;
}

function scrollToEnd() {
  window.scrollTo(0, document.documentElement.scrollHeight);
}

function canWrite() {
  if (!page.principal) return false;
  if (page.principal.kind !== 'guest') return true;
  return sessionStorage.getItem(LEVEL_KEY) === 'control';
}

// ---- The session list -----------------------------------------------------

// watchList follows the session list: the host pushes each change of it
// (session.list.watch), and the list is read once the subscription runs.
async function watchList() {
  try {
    const r = await call('session.list.watch', {});
    page.listSub = r.subscriptionId;
  } catch (e) {
    // A guest whose link has ended: the list says so.
  }
  loadList();
}

async function loadList() {
  if (page.listLoading) {
    page.listStale = true;
    return;
  }
  page.listLoading = true;
  page.listStale = false;
  let sessions = [];
  let cursor;
  try {
    do {
      const r = await call('session.list', cursor ? { cursor } : {});
      sessions = sessions.concat(r.sessions || []);
      cursor = r.nextCursor;
    } while (cursor);
  } catch (e) {
    page.listLoading = false;
    return;
  }
  page.listLoading = false;
  page.sessions = sessions;
  // A change told while the list was read may be older or newer than
  // what was read: read it again.
  if (page.listStale) loadList();
  renderList();
  if (!page.cur) {
    const want = routeSession();
    if (want) showSession(want);
    else if (page.principal.kind === 'guest' && sessions.length === 1) showSession(sessions[0].sessionId);
  }
}

// listChanged applies a change of one session's entry the host pushed:
// it takes its place in the list (the most recently active first), or
// leaves it when removed or archived.
function listChanged(f) {
  if (page.listLoading) page.listStale = true;
  const i = page.sessions.findIndex((x) => x.sessionId === f.sessionId);
  if (i >= 0) page.sessions.splice(i, 1);
  const s = f.session;
  if (s && !f.removed && !s.archived) {
    page.sessions.push(s);
    page.sessions.sort((a, b) => (a.lastActivityAt < b.lastActivityAt ? 1 : a.lastActivityAt > b.lastActivityAt ? -1 : a.sessionId < b.sessionId ? -1 : 1));
  }
  renderList();
  // The session shown takes its title from here; its state comes from
  // its own subscription, which knows its turn.
  if (page.cur && page.cur.id === f.sessionId && s && !f.removed) $('title').textContent = s.title || s.sessionId;
}

function renderList() {
  const ul = $('sessions');
  ul.replaceChildren();
  for (const s of page.sessions) {
    const li = el('li');
    li.dataset.session = s.sessionId;
    const a = el('a');
    a.href = '#/s/' + encodeURIComponent(s.sessionId);
    a.append(el('span', 'name', s.title || s.sessionId));
    const st = el('span', 'status', s.damaged ? 'damaged' : s.status);
    st.dataset.status = s.status;
    a.append(st, el('span', 'meta', s.sessionId), el('span', 'cwd', s.cwd));
    li.append(a);
    ul.append(li);
  }
  $('no-sessions').hidden = page.sessions.length > 0 || !page.principal;
}

function routeSession() {
  const m = /^#\/s\/(.+)$/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}

window.addEventListener('hashchange', () => {
  const id = routeSession();
  if (id && (!page.cur || page.cur.id !== id)) showSession(id);
  if (!id && page.cur) leaveSession(false);
});

// ---- One session ----------------------------------------------------------

function showSession(id) {
  if (page.cur) leaveSession(false);
  if (location.hash !== '#/s/' + encodeURIComponent(id)) history.pushState(null, '', '#/s/' + encodeURIComponent(id));
  page.cur = {
    id, subId: null, lastSeq: null, snapshot: null, turnRunning: false,
    streams: new Map(), // turnId/messageId: the block streaming
    done: new Map(), // turnId: blocks of replies ended, awaiting their record
    tools: new Map(), // tool call id: its card
    interactions: new Map(),
    olderCursor: null,
    resources: [],
    pty: null,
    run: null, // the shell run whose output is shown
  };
  $('list-view').hidden = true;
  $('session-view').hidden = false;
  $('back').hidden = false;
  $('title').textContent = id;
  $('transcript').replaceChildren();
  $('approvals').replaceChildren();
  $('resources').replaceChildren();
  $('earlier').hidden = true;
  $('prompt-form').hidden = !canWrite();
  if (page.ws && page.ws.readyState === WebSocket.OPEN && page.principal) openSubscription();
}

function leaveSession(toList) {
  const cur = page.cur;
  dropPTY();
  dropRun();
  page.cur = null;
  if (cur && cur.subId) call('subscription.close', { subscriptionId: cur.subId }).catch(() => {});
  $('session-view').hidden = true;
  $('list-view').hidden = false;
  $('back').hidden = true;
  $('title').textContent = 'agentd';
  if (toList && location.hash) history.pushState(null, '', location.pathname);
  renderList();
}

// openSubscription follows the session: the first time from its projection
// and the transcript's last page, after a drop from the last record it had.
async function openSubscription() {
  const cur = page.cur;
  const resume = cur.lastSeq !== null;
  const transcript = resume ? { kind: 'after', sequence: cur.lastSeq } : { kind: 'tail' };
  let r;
  try {
    r = await call('subscription.open', { sessionId: cur.id, transcript, ready: true });
  } catch (e) {
    if (page.cur === cur) {
      if (e.code === 'not_found') notice('No session ' + cur.id + '.');
      else if (e.message !== 'the connection closed') notice(e.message);
    }
    return;
  }
  if (page.cur !== cur) {
    call('subscription.close', { subscriptionId: r.subscriptionId }).catch(() => {});
    return;
  }
  cur.subId = r.subscriptionId;
  applySnapshot(r.snapshot, resume);
  if (!resume) {
    cur.lastSeq = r.snapshot.transcriptSequence;
    if (cur.lastSeq > 0) loadOlder(cur.lastSeq);
  }
  await loadResources();
  if (page.cur !== cur) return;
  if (cur.pty) choosePTY(cur.pty.ref);
  if (cur.run) followRun(cur, cur.run); // resumes from where it was
}

async function loadOlder(through) {
  const cur = page.cur;
  let r;
  try {
    r = await call('session.transcript.page', {
      subscriptionId: cur.subId, direction: 'older', throughSequence: through,
      cursor: cur.olderCursor, anchorSequence: null, maxBytes: PAGE_BYTES,
    });
  } catch (e) {
    return;
  }
  if (page.cur !== cur) return;
  const first = cur.olderCursor === null;
  const frag = document.createDocumentFragment();
  // Records past the snapshot come as entry_added deltas, shown already.
  for (const rec of r.records || []) if (rec.seq <= through) renderRecord(rec, frag);
  const height = document.documentElement.scrollHeight;
  $('transcript').prepend(frag);
  // The first page opens at its end, as the session stands; an earlier
  // page keeps in view what was.
  if (first) scrollToEnd();
  else window.scrollBy(0, document.documentElement.scrollHeight - height);
  cur.olderCursor = r.nextCursor;
  cur.olderThrough = through;
  $('earlier').hidden = !r.nextCursor;
}

function applySnapshot(s, resume) {
  const cur = page.cur;
  cur.snapshot = s;
  setSession(s.session);
  cur.turnRunning = !!(s.rootTurn && s.rootTurn.status === 'running');
  cur.turnId = s.rootTurn ? s.rootTurn.turnId : null;
  renderQueue(s.queue);
  renderPlan(s.todo);
  cur.interactions.clear();
  for (const i of s.interactions || []) cur.interactions.set(i.interactionId, i);
  renderApprovals();
  if (resume) {
    // A stream that was live when the connection dropped is told again by
    // the snapshot: drop what the page had of it.
    for (const b of cur.streams.values()) b.remove();
    cur.streams.clear();
  }
  for (const m of s.streams || []) {
    const b = streamBlock(m.turnId, m.messageId);
    if (m.thinking) b.thinking.appendData(m.thinking);
    b.text.appendData(m.text || '');
  }
  for (const tc of s.toolCalls || []) {
    const card = toolCard(tc.id, tc.name, tc.arguments);
    card.classList.add('running');
    setOutput(card, tc.output || '', false);
  }
  updateControls();
}

function setSession(s) {
  const st = $('session-status');
  st.textContent = s.status;
  st.dataset.status = s.status;
  $('title').textContent = s.title || s.sessionId;
  $('session-cwd').textContent = s.cwd;
  $('session-model').textContent = s.model || '';
  const li = page.sessions.find((x) => x.sessionId === s.sessionId);
  if (li) li.status = s.status;
}

function updateControls() {
  const cur = page.cur;
  const write = canWrite();
  $('prompt-form').hidden = !write;
  $('interrupt').hidden = !write || !cur.turnRunning;
  $('placement').hidden = !write || !cur.turnRunning;
  $('send').textContent = cur.turnRunning ? 'Queue' : 'Send';
  $('new-pty').hidden = !page.principal || page.principal.kind === 'guest';
}

function applyDelta(d) {
  const cur = page.cur;
  switch (d.event) {
    case 'run_start':
      cur.turnRunning = true;
      cur.turnId = d.turnId;
      updateControls();
      break;
    case 'run_end':
      cur.turnRunning = false;
      for (const [k, b] of cur.streams) if (k.startsWith(d.turnId + '/')) { clearRetry(b); b.block.classList.remove('streaming'); cur.streams.delete(k); }
      updateControls();
      break;
    case 'message_start':
      streamBlock(d.turnId, d.messageId);
      break;
    case 'model_retry': {
      if (d.retry) showRetry(streamBlock(d.turnId, d.messageId), d.retry);
      break;
    }
    case 'message_update': {
      const b = streamBlock(d.turnId, d.messageId);
      clearRetry(b);
      if (d.skipped) b.text.appendData(' … ' + d.skipped + ' bytes skipped … ');
      if (d.thinking) { b.thinkingBox.hidden = false; b.thinking.appendData(d.thinking); }
      if (d.text) b.text.appendData(d.text);
      break;
    }
    case 'message_end': {
      const key = d.turnId + '/' + d.messageId;
      const b = cur.streams.get(key);
      if (b) {
        clearRetry(b);
        cur.streams.delete(key);
        b.block.classList.remove('streaming');
        if (!cur.done.has(d.turnId)) cur.done.set(d.turnId, []);
        cur.done.get(d.turnId).push(b.block);
      }
      break;
    }
    case 'tool_call_start': {
      const card = toolCard(d.toolCall.id, d.toolCall.name, d.toolCall.arguments);
      card.classList.add('running');
      break;
    }
    case 'tool_call_update': {
      const card = toolCard(d.toolCall.id, d.toolCall.name);
      if (d.skipped) appendOutput(card, '\n… ' + d.skipped + ' bytes skipped …\n');
      appendOutput(card, d.toolCall.output || '');
      break;
    }
    case 'tool_call_end': {
      const card = toolCard(d.toolCall.id, d.toolCall.name);
      card.classList.remove('running');
      card.classList.toggle('error', !!d.toolCall.isError);
      setOutput(card, d.toolCall.output || '', true);
      break;
    }
    case 'entry_added':
      if (d.entry) {
        if (cur.lastSeq !== null && d.entry.seq <= cur.lastSeq) break;
        cur.lastSeq = d.entry.seq;
        renderRecord(d.entry, $('transcript'));
      }
      break;
    case 'queue_changed':
      renderQueue(d.queue);
      break;
    case 'interaction_added':
      cur.interactions.set(d.interaction.interactionId, d.interaction);
      renderApprovals();
      break;
    case 'interaction_resolved':
      cur.interactions.delete(d.interaction.interactionId);
      renderApprovals();
      break;
    case 'todo_changed':
      renderPlan(d.todo);
      break;
    case 'session_changed':
      setSession(d.session);
      break;
    case 'compaction':
      showCompaction(d.compaction);
      break;
  }
}

// showRetry shows, in a reply waiting for its model, that the model call
// failed and is made again: "retrying in 4s", counting down from when the
// notice came (the wait it states, not the host's clock), and why.
function showRetry(b, r) {
  clearRetry(b);
  const note = el('div', 'retry', '');
  b.block.append(note);
  const at = Date.now() + Math.max(0, r.delayMs || 0);
  const why = ': ' + r.reason + ' (attempt ' + r.attempt + ' of ' + r.maxAttempts + ' failed)';
  const tick = () => {
    if (!note.isConnected && b.retry) { clearInterval(b.retry.timer); return; }
    const s = Math.ceil((at - Date.now()) / 1000);
    note.textContent = (s > 0 ? 'retrying in ' + s + 's' : 'retrying now') + why;
  };
  tick();
  b.retry = { note, timer: setInterval(tick, 1000) };
}

function clearRetry(b) {
  if (!b.retry) return;
  clearInterval(b.retry.timer);
  b.retry.note.remove();
  b.retry = null;
}

function streamBlock(turnId, messageId) {
  const cur = page.cur;
  const key = turnId + '/' + messageId;
  let b = cur.streams.get(key);
  if (b) return b;
  const block = el('div', 'rec assistant streaming');
  block.dataset.turn = turnId;
  block.append(el('span', 'who', 'agent'));
  const thinkingBox = el('details', 'thinking');
  thinkingBox.hidden = true;
  thinkingBox.append(el('summary', '', 'thinking'));
  const thinking = document.createTextNode('');
  thinkingBox.append(thinking);
  const textEl = el('div', 'text');
  const text = document.createTextNode('');
  textEl.append(text);
  block.append(thinkingBox, textEl);
  $('transcript').append(block);
  b = { block, text, thinking, thinkingBox };
  cur.streams.set(key, b);
  return b;
}

// renderRecord shows a transcript record; an assistant message takes the
// place of the streamed block it completes.
function renderRecord(rec, into) {
  const cur = page.cur;
  const data = rec.data || {};
  switch (rec.type) {
    case 'user_message':
    case 'queue_add': {
      if (rec.type === 'queue_add') break; // shown in the queue until taken
      const b = el('div', 'rec user');
      b.append(el('span', 'who', data.steering ? 'you (steering)' : 'you'), el('div', 'text', data.text || ''));
      into.append(b);
      break;
    }
    case 'assistant_message': {
      const b = el('div', 'rec assistant');
      b.dataset.seq = rec.seq;
      b.append(el('span', 'who', 'agent'));
      const calls = [];
      for (const part of data.parts || []) {
        if (part.type === 'text') b.append(el('div', 'text', part.text));
        else if (part.type === 'thinking') {
          const t = el('details', 'thinking');
          t.append(el('summary', '', 'thinking'), document.createTextNode(part.text || ''));
          b.append(t);
        } else if (part.type === 'tool_call') calls.push(part.toolCall);
      }
      const done = rec.turnId && cur.done.get(rec.turnId);
      const streamed = done && done.shift();
      if (rec.omittedBytes) b.append(el('div', 'meta', rec.omittedBytes + ' bytes not shown'));
      if (b.childNodes.length > 1 || !streamed) {
        if (streamed) streamed.replaceWith(b);
        else into.append(b);
      } else if (streamed) {
        streamed.remove();
      }
      for (const tc of calls) {
        if (!cur.tools.has(tc.id)) into.append(newToolCard(tc.id, tc.name, tc.arguments));
      }
      break;
    }
    case 'tool_results':
      for (const part of data.parts || []) {
        if (part.type !== 'tool_result') continue;
        const r = part.toolResult;
        let card = cur.tools.get(r.callId);
        if (!card) { card = newToolCard(r.callId, r.name); into.append(card); }
        card.classList.remove('running');
        card.classList.toggle('error', !!r.isError);
        setOutput(card, typeof r.content === 'string' ? r.content : JSON.stringify(r.content), true);
      }
      break;
    case 'turn_end':
      if (data.status && data.status !== 'completed') {
        into.append(el('div', 'rec note failed', 'Turn ' + data.status + (data.error ? ': ' + data.error : '')));
      }
      break;
    case 'tool_allowed':
      into.append(el('div', 'rec note', (data.tool || 'a tool') + ' allowed for the rest of the session'));
      break;
    case 'compaction': {
      // Where the context was compacted: the model is sent the summary
      // in place of what came before.
      const b = el('div', 'rec note compaction');
      b.dataset.seq = rec.seq;
      b.append(el('div', '', 'Context compacted here (' + (data.trigger === 'auto' ? 'automatic' : 'asked for') + '): ' +
        (data.messages || 0) + ' earlier messages summarized, about ' + (data.tokensBefore || 0) + ' → ' + (data.tokensAfter || 0) +
        ' tokens of a ' + (data.contextWindow || 0) + '-token window.'));
      const sum = el('details', 'summary');
      sum.append(el('summary', '', 'summary'), document.createTextNode(data.summary || ''));
      b.append(sum);
      const live = document.querySelector('#transcript .compacting');
      if (live) live.remove();
      into.append(b);
      break;
    }
    case 'file_change':
      into.append(el('div', 'rec note', (data.tool || 'a tool') + (data.existed ? ' changed ' : ' created ') + (data.path || '')));
      break;
    case 'forked':
      into.append(el('div', 'rec note', data.rewoundTurnId ?
        'Rewound from session ' + data.fromSessionId + ' to before turn ' + data.rewoundTurnId :
        'Forked from session ' + data.fromSessionId + ' at record ' + data.atSequence));
      break;
  }
}

// showCompaction shows a compaction as it happens; its record replaces
// the note once it is done.
function showCompaction(c) {
  if (!c) return;
  let live = document.querySelector('#transcript .compacting');
  if (c.state === 'started') {
    if (!live) { live = el('div', 'rec note compacting'); $('transcript').append(live); }
    live.textContent = 'Compacting the context: about ' + (c.tokensBefore || 0) + ' tokens of a ' + (c.contextWindow || 0) + '-token window…';
  } else if (c.state === 'failed') {
    if (!live) { live = el('div', 'rec note'); $('transcript').append(live); }
    live.className = 'rec note failed';
    live.textContent = 'Compaction failed; the session is as it was: ' + (c.error || '');
  }
}

function newToolCard(id, name, args) {
  const card = el('div', 'rec tool');
  card.dataset.call = id;
  card.append(el('span', 'who', name || 'tool'));
  if (args !== undefined && args !== null) {
    const text = args && typeof args.command === 'string' ? args.command : JSON.stringify(args);
    card.append(el('div', 'args', text));
  }
  page.cur.tools.set(id, card);
  return card;
}

function toolCard(id, name, args) {
  const have = page.cur.tools.get(id);
  if (have) return have;
  const card = newToolCard(id, name, args);
  $('transcript').append(card);
  return card;
}

// setOutput shows a tool call's output; when whole and long, folded to
// its opening lines.
function setOutput(card, text, whole) {
  let out = card.querySelector('.out-box');
  if (out) out.remove();
  card.liveOut = null;
  const long = text.length > FOLD_CHARS || text.split('\n').length > FOLD_LINES;
  if (whole && long) {
    out = el('details', 'out-box');
    const lines = text.split('\n').length;
    out.append(el('summary', '', 'output: ' + lines + ' lines, ' + text.length + ' characters'), el('pre', 'out', text));
  } else {
    out = el('div', 'out-box');
    const pre = el('pre', 'out', text);
    out.append(pre);
    if (!whole) card.liveOut = pre;
  }
  card.append(out);
}

function appendOutput(card, text) {
  if (!card.liveOut) setOutput(card, '', false);
  const pre = card.liveOut;
  pre.append(document.createTextNode(text));
  pre.scrollTop = pre.scrollHeight;
}

function renderQueue(q) {
  const items = [...((q && q.steering) || []), ...((q && q.followup) || [])];
  const ul = $('queue');
  ul.replaceChildren();
  for (const e of items) {
    const li = el('li', '', (e.placement === 'steering' ? 'steer: ' : 'next: ') + ((e.content && e.content.text) || ''));
    if (canWrite()) {
      li.append(' ', button('Retract', '', () => call('queue.retract', { sessionId: page.cur.id, entryId: e.entryId }).catch((err) => notice(err.message))));
    }
    ul.append(li);
  }
  $('queue-box').hidden = items.length === 0;
}

function renderPlan(todo) {
  const ol = $('plan');
  ol.replaceChildren();
  for (const t of todo || []) {
    const li = el('li', '', t.text);
    li.dataset.status = t.status;
    ol.append(li);
  }
  $('plan-box').hidden = !todo || todo.length === 0;
  if (todo && todo.length) $('plan-box').open = true;
}

function renderApprovals() {
  const box = $('approvals');
  box.replaceChildren();
  for (const i of page.cur.interactions.values()) {
    const d = el('div', 'approval');
    d.dataset.interaction = i.interactionId;
    d.append(el('div', 'text', i.prompt));
    if (canWrite()) {
      const row = el('div', 'row');
      const answer = (a) => () => {
        for (const b of row.querySelectorAll('button')) b.disabled = true;
        call('interaction.answer', { sessionId: page.cur.id, interactionId: i.interactionId, answer: a })
          .catch((err) => { notice(err.message); for (const b of row.querySelectorAll('button')) b.disabled = false; });
      };
      row.append(button('Allow', 'allow', answer('allow')), button('Deny', 'deny', answer('deny')));
      d.append(row);
    } else {
      d.append(el('div', 'meta', 'waiting for the owner to answer'));
    }
    box.append(d);
  }
}

// ---- Prompting ------------------------------------------------------------

$('prompt-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = $('prompt').value.trim();
  if (!text || !page.cur) return;
  const messageId = 'web-' + Date.now().toString(36) + Math.random().toString(36).slice(2, 6);
  const placement = page.cur.turnRunning ? $('placement').value : 'next_turn';
  call('turn.message.submit', { sessionId: page.cur.id, messageId, content: { text }, placement })
    .then(() => { $('prompt').value = ''; })
    .catch((err) => notice(err.message));
});

$('prompt').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $('prompt-form').requestSubmit();
  }
});

$('interrupt').addEventListener('click', () => {
  call('turn.interrupt', { sessionId: page.cur.id, turnId: page.cur.turnId }).catch((err) => notice(err.message));
});

$('back').addEventListener('click', () => leaveSession(true));

// A new terminal runs the owner's shell in the session's directory, in its
// sandbox, as agentd shell does.
$('new-pty').addEventListener('click', async () => {
  const cur = page.cur;
  const launchId = 'web-' + Date.now().toString(36) + Math.random().toString(36).slice(2, 6);
  try {
    const r = await call('runtime.resource.start', {
      sessionId: cur.id, launchId, command: 'exec "${SHELL:-/bin/sh}"', pty: true, cols: 80, rows: 24,
    });
    await loadResources();
    if (page.cur === cur) choosePTY(r.ref);
  } catch (err) {
    notice(err.message);
  }
});

$('earlier').addEventListener('click', () => {
  if (page.cur && page.cur.olderCursor) loadOlder(page.cur.olderThrough);
});

// ---- Shell runs and PTYs --------------------------------------------------

async function loadResources() {
  const cur = page.cur;
  let list = [];
  try {
    let cursor, revision;
    do {
      const r = await call('runtime.resource.query', cursor ? { sessionId: cur.id, cursor, revision } : { sessionId: cur.id });
      list = list.concat(r.resources || []);
      cursor = r.nextCursor;
      revision = r.revision;
    } while (cursor);
  } catch (e) {
    return;
  }
  if (page.cur !== cur) return;
  cur.resources = list;
  renderResources();
}

// resourceChanged applies a resource's new state the host pushed.
function resourceChanged(r) {
  const cur = page.cur;
  if (!r || !r.ref) return;
  const i = cur.resources.findIndex((x) => x.ref === r.ref);
  if (i >= 0) cur.resources[i] = r;
  else cur.resources.push(r);
  renderResources();
}

// controllerText says who controls a PTY, from its state's controller.
function controllerText(c) {
  if (!c) return 'nobody controls it';
  if (c.connectionId === page.connectionId) return 'this page controls it';
  const p = c.principal || {};
  if (p.kind === 'guest') return p.label ? 'guest \u201c' + p.label + '\u201d controls it' : 'a guest controls it';
  if (c.surface === 'web') return "the owner's browser controls it";
  if (c.surface === 'acp') return "the owner's editor controls it";
  return "the owner's terminal controls it";
}

function renderResources() {
  const cur = page.cur;
  const ul = $('resources');
  ul.replaceChildren();
  for (const r of cur.resources) {
    const li = el('li');
    li.dataset.ref = r.ref;
    li.append(el('span', 'meta', r.ref), el('span', 'cmd', r.command));
    const st = el('span', 'status', r.state + (r.exitCode !== undefined && r.exitCode !== null ? ' ' + r.exitCode : ''));
    st.dataset.status = r.state;
    li.append(st);
    if (r.kind === 'pty') {
      li.append(button(cur.pty && cur.pty.ref === r.ref ? 'Shown' : 'Show', 'show', () => choosePTY(r.ref)));
      if (r.state === 'running') {
        const who = el('p', 'meta who-ctl', controllerText(r.controller));
        who.dataset.controlled = r.controller ? (r.controller.connectionId === page.connectionId ? 'here' : 'other') : 'free';
        li.append(who);
      }
    } else {
      li.append(button(cur.run && cur.run.ref === r.ref ? 'Shown' : 'Output', 'show', () => showRun(r.ref)));
    }
    ul.append(li);
  }
  if (cur.resources.length === 0) ul.append(el('li', 'meta', 'none'));
  if (cur.pty) ptyWho(cur.pty);
  if (cur.run) runState(cur.run);
}

// ---- A shell run's output -------------------------------------------------

// visible returns text with its control characters shown, never acted on,
// in their caret form (an escape is ^[), as agentd logs shows them on a
// terminal; tabs and line ends stay, carriage returns go.
function visible(text) {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, (c) => {
    if (c === '\r') return '';
    if (c === '\u007f') return '^?';
    return '^' + String.fromCharCode(c.charCodeAt(0) + 64);
  });
}

// showRun shows a shell run's output: the last of it, then what it
// writes, live, until it ends.
function showRun(ref) {
  const cur = page.cur;
  dropRun();
  const run = { ref, next: null, reading: false, done: false, shown: 0 };
  cur.run = run;
  $('run-out').replaceChildren();
  $('run-end').textContent = '';
  $('run-box').hidden = false;
  $('run-box').scrollIntoView({ block: 'nearest' });
  runState(run);
  renderResources();
  followRun(cur, run);
}

function runState(run) {
  const r = page.cur.resources.find((x) => x.ref === run.ref) || { ref: run.ref, command: '', state: '' };
  $('run-head').textContent = r.ref + ' \u00b7 ' + r.command + ' \u00b7 ' + r.state;
}

// followRun reads the run's output from where the page has it, each read
// waiting for what comes next, until the output is complete, the view
// closes or the connection drops (the next connection resumes it).
async function followRun(cur, run) {
  if (run.reading || run.done) return;
  run.reading = true;
  try {
    while (page.cur === cur && cur.run === run) {
      const input = { sessionId: cur.id, ref: run.ref, wait: true };
      if (run.next !== null) input.offset = run.next;
      const r = await call('runtime.resource.output.read', input);
      if (page.cur !== cur || cur.run !== run) return;
      if (run.next === null && r.offset > 0) {
        $('run-out').append(el('span', 'ctl', '\u2026 ' + r.offset + ' earlier bytes not shown\n'));
      }
      run.next = r.nextOffset;
      if (r.data) appendRun(run, r.data);
      resourceChanged(r.resource);
      if (r.complete) {
        run.done = true;
        const code = r.resource.exitCode;
        $('run-end').textContent = 'exited' + (code !== undefined && code !== null ? ' with ' + code : '');
        return;
      }
    }
  } catch (err) {
    if (page.cur === cur && cur.run === run && err.message !== 'the connection closed' && err.message !== 'not connected') notice(err.message);
  } finally {
    run.reading = false;
  }
}

function appendRun(run, data) {
  const out = $('run-out');
  const follow = out.scrollTop + out.clientHeight >= out.scrollHeight - 20;
  out.append(document.createTextNode(visible(data)));
  run.shown += data.length;
  // What is shown is bounded: the oldest goes.
  while (run.shown > RUN_KEEP && out.firstChild) {
    run.shown -= out.firstChild.textContent.length;
    out.firstChild.remove();
  }
  if (follow) out.scrollTop = out.scrollHeight;
}

function dropRun() {
  if (page.cur) page.cur.run = null;
  $('run-out').replaceChildren();
  $('run-box').hidden = true;
}

$('run-close').addEventListener('click', () => {
  dropRun();
  if (page.cur) renderResources();
});

let xtermLoading = null;

function loadXterm() {
  if (window.Terminal) return Promise.resolve();
  if (!xtermLoading) {
    xtermLoading = new Promise((resolve, reject) => {
      const css = document.createElement('link');
      css.rel = 'stylesheet';
      css.href = '/vendor/xterm.css';
      document.head.append(css);
      const s = document.createElement('script');
      s.src = '/vendor/xterm.js';
      s.onload = resolve;
      s.onerror = reject;
      document.head.append(s);
    });
  }
  return xtermLoading;
}

// choosePTY shows a PTY: its screen, then its output live. The first key
// takes control of it when nobody has it; otherwise it stays read-only and
// says who holds it.
async function choosePTY(ref) {
  const cur = page.cur;
  await loadXterm();
  if (page.cur !== cur) return;
  if (!cur.pty || cur.pty.ref !== ref) {
    dropPTY();
    const res = cur.resources.find((r) => r.ref === ref) || {};
    const term = new window.Terminal({ cols: 80, rows: 24, convertEol: false, fontSize: 13, scrollback: 1000 });
    const host = $('pty');
    host.replaceChildren();
    $('pty-box').hidden = false; // shown first: the terminal measures its cells as it opens
    term.open(host);
    cur.pty = { ref, term, controllerId: null, next: 0, sending: Promise.resolve(), state: res.state };
    term.onData((data) => ptyKey(cur, data));
    ptyWho(cur.pty);
    // Brought into view: a terminal out of view is not drawn.
    $('pty-box').scrollIntoView({ block: 'nearest' });
  }
  if (cur.subId) {
    call('subscription.pty_interest.set', { subscriptionId: cur.subId, refs: [ref] }).catch((err) => notice(err.message));
  }
  renderResources();
}

// ptyWho says who controls the PTY shown, as its state names it, and
// offers to take control when the page may and nobody has it, or to let
// it go when the page has it.
function ptyWho(p, text) {
  const r = page.cur.resources.find((x) => x.ref === p.ref) || {};
  const mine = !!p.controllerId;
  const free = !r.controller;
  let who = text;
  if (!who) {
    if (r.state && r.state !== 'running') who = p.ref + ': ' + r.state;
    else if (!canWrite()) who = p.ref + ': read-only, watching; ' + controllerText(r.controller);
    else if (mine) who = p.ref + ': this page controls it';
    else if (free) who = p.ref + ': nobody controls it; type or take control';
    else who = p.ref + ': read-only; ' + controllerText(r.controller);
  }
  $('pty-who').textContent = who;
  $('pty-take').hidden = !canWrite() || mine || !free || r.state !== 'running';
  $('pty-release').hidden = !mine;
}

// takePTY takes control of the PTY shown, and tells the PTY its size.
async function takePTY(cur, p) {
  if (p.controllerId) return;
  const a = await call('runtime.resource.controller.acquire', { sessionId: cur.id, ref: p.ref });
  p.controllerId = a.controllerId;
  p.next = a.nextSequence;
  if (a.resource) resourceChanged(a.resource);
  ptyWho(p);
  const size = { cols: p.term.cols, rows: p.term.rows };
  await call('runtime.resource.controller.control', { sessionId: cur.id, ref: p.ref, controllerId: p.controllerId, sequence: p.next++, ...size });
}

$('pty-take').addEventListener('click', () => {
  const cur = page.cur;
  const p = cur && cur.pty;
  if (!p) return;
  p.sending = p.sending.then(() => takePTY(cur, p)).catch((err) => {
    p.controllerId = null;
    ptyWho(p, p.ref + ': read-only. ' + err.message);
  });
});

$('pty-release').addEventListener('click', () => {
  const cur = page.cur;
  const p = cur && cur.pty;
  if (!p || !p.controllerId) return;
  p.sending = p.sending.then(async () => {
    const controllerId = p.controllerId;
    p.controllerId = null;
    ptyWho(p);
    await call('runtime.resource.controller.release', { sessionId: cur.id, ref: p.ref, controllerId });
  }).catch((err) => notice(err.message));
});

function ptyData(f) {
  const p = page.cur.pty;
  if (!p || p.ref !== f.ref) return;
  if (f.screen) p.term.reset();
  p.term.write(f.data);
}

function ptyKey(cur, data) {
  const p = cur.pty;
  if (!p || !canWrite()) return;
  p.sending = p.sending.then(async () => {
    if (page.cur !== cur || cur.pty !== p) return;
    try {
      await takePTY(cur, p);
      await call('runtime.resource.controller.control', { sessionId: cur.id, ref: p.ref, controllerId: p.controllerId, sequence: p.next++, data });
    } catch (err) {
      p.controllerId = null;
      ptyWho(p, p.ref + ': read-only. ' + err.message);
    }
  });
}

function dropPTY() {
  const p = page.cur && page.cur.pty;
  if (p) {
    p.term.dispose();
    page.cur.pty = null;
  }
  $('pty').replaceChildren();
  $('pty-box').hidden = true;
}

// ---- Start ----------------------------------------------------------------

(async () => {
  const token = takeToken();
  if (token) {
    const status = await login(token);
    if (status === 401) {
      // The owner's login token is accepted once: a reload of its link
      // finds it spent, and the cookie of its first use logs the page in.
      sessionStorage.removeItem(TOKEN_KEY);
    }
  }
  connect();
})();
