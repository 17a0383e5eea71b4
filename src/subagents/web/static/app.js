// The subagents web console: a single page, vanilla JS, no build step.
//
// Security rule for this whole file: every node is built with createElement /
// createElementNS and every piece of text is set with textContent. Model-written text
// (transcripts, prompts, names) is never parsed as HTML.
'use strict';

(() => {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const PAGE = 500; // records page size: the API's maximum
  // Statuses (the CLI's vocabulary) map to CSS classes `s-<status>` (spaces as dashes):
  // running, waiting for approval, idle, ready, completed, failed, aborted, crashed, cut-off.
  // An unknown one still gets its own class.

  // ---------------------------------------------------------------- small helpers

  /** Build an element: el('div', {class: 'x', dataset: {a: 1}}, child, 'text', ...). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    applyAttrs(node, attrs);
    for (const child of children) append(node, child);
    return node;
  }

  /** Build an SVG element; attributes are set with setAttribute. */
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    applyAttrs(node, attrs);
    for (const child of children) append(node, child);
    return node;
  }

  function applyAttrs(node, attrs) {
    if (!attrs) return;
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'text') node.textContent = String(value);
      else if (key === 'dataset') Object.assign(node.dataset, value);
      else if (key === 'on') for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
  }

  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }

  /** Set text only when it changed: cheap, and keeps the DOM quiet at 2,000 rows. */
  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function setAttr(node, name, value) {
    if (node.getAttribute(name) !== value) node.setAttribute(name, value);
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  const shortId = (id) => (id ? String(id).slice(0, 8) : '');

  /** Seconds since the epoch from a number (already seconds) or an ISO string. */
  function epoch(value) {
    if (value === null || value === undefined) return null;
    if (typeof value === 'number') return value;
    const ms = Date.parse(value);
    return Number.isNaN(ms) ? null : ms / 1000;
  }

  function localTime(value) {
    const t = epoch(value);
    return t === null ? '' : new Date(t * 1000).toLocaleString();
  }

  /** Same format as the CLI's `duration`: 4.2s, 3m07s, 1h05m. */
  function duration(seconds) {
    if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '-';
    if (seconds < 60) return `${seconds.toFixed(1)}s`;
    const minutes = Math.floor(seconds / 60);
    const secs = Math.floor(seconds % 60);
    if (minutes < 60) return `${minutes}m${String(secs).padStart(2, '0')}s`;
    return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
  }

  const tokensOf = (usage) => (usage ? (usage.input_tokens || 0) + (usage.output_tokens || 0) : 0);

  function compactJson(value) {
    try {
      return JSON.stringify(value);
    } catch (_) {
      return String(value);
    }
  }

  /** Tool arguments arrive as a JSON string: show them indented when they parse. */
  function prettyArgs(args) {
    if (typeof args !== 'string') return JSON.stringify(args, null, 2);
    try {
      return JSON.stringify(JSON.parse(args), null, 2);
    } catch (_) {
      return args;
    }
  }

  const enc = encodeURIComponent;

  /** Run fn at most once per animation frame, however often it is asked for. */
  function frameCoalescer(fn) {
    let pending = false;
    return () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        fn();
      });
    };
  }

  // ---------------------------------------------------------------- error banner, live dot

  const errorBanner = document.getElementById('error');
  errorBanner.addEventListener('click', () => showError(null));

  function showError(text) {
    errorBanner.textContent = text || '';
    errorBanner.hidden = !text;
  }

  const liveIndicator = document.getElementById('live');

  function setLive(ok) {
    setText(liveIndicator, ok ? 'live' : 'reconnecting');
    liveIndicator.className = ok ? 'live-on' : 'live-off';
    liveIndicator.title = ok ? 'receiving updates' : 'connection lost; retrying';
  }

  // ---------------------------------------------------------------- HTTP

  /** Turn a failed response into the banner's `CODE: message` line. */
  async function failure(response) {
    let code = `HTTP_${response.status}`;
    let message = response.statusText || 'request failed';
    try {
      const body = await response.json();
      if (body && body.error) {
        code = body.error.code || code;
        message = body.error.message || message;
      }
    } catch (_) {
      /* not JSON: keep the status line */
    }
    const err = new Error(`${code}: ${message}`);
    err.code = code;
    return err;
  }

  async function getJSON(url) {
    const response = await fetch(url, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
    if (!response.ok) throw await failure(response);
    return response.json();
  }

  async function postJSON(url, obj) {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(obj),
      credentials: 'same-origin',
    });
    if (!response.ok) throw await failure(response);
    return response.json();
  }

  /** POST a control; a started job joins the jobs list, a refusal shows in the banner. */
  async function control(url, obj) {
    try {
      const body = await postJSON(url, obj);
      showError(null);
      if (body && body.job) mergeJobs([body.job]);
      return body && body.job;
    } catch (err) {
      showError(err.code ? err.message : `NETWORK: ${err.message}`);
      return null;
    }
  }

  function reportError(err) {
    showError(err && err.code ? err.message : `NETWORK: ${err && err.message}`);
  }

  /**
   * An EventSource with the live indicator wired in. EventSource retries by itself while
   * it is CONNECTING; when the server answers with an error it goes CLOSED and we reopen it.
   */
  function openStream(url, handlers, onFirstOpen) {
    let source = null;
    let retry = null;
    let closed = false;
    let opened = false;
    const connect = () => {
      source = new EventSource(url, { withCredentials: true });
      source.onopen = () => {
        setLive(true);
        if (!opened && onFirstOpen) onFirstOpen();
        opened = true;
      };
      source.onerror = () => {
        setLive(false);
        if (source.readyState === EventSource.CLOSED && !closed) retry = setTimeout(connect, 3000);
      };
      for (const [name, fn] of Object.entries(handlers)) {
        source.addEventListener(name, (ev) => {
          let data;
          try {
            data = JSON.parse(ev.data);
          } catch (_) {
            return; // a malformed event must not stop the stream
          }
          fn(data);
        });
      }
    };
    connect();
    return {
      close() {
        closed = true;
        clearTimeout(retry);
        if (source) source.close();
      },
    };
  }

  function markReady() {
    document.body.dataset.ready = '1';
  }

  function countTreeEvent() {
    document.body.dataset.treeEvents = String(Number(document.body.dataset.treeEvents || 0) + 1);
  }

  // ---------------------------------------------------------------- jobs (shared by pages)

  const jobs = new Map(); // id -> JOB, merged from `jobs` events and POST answers
  let jobsView = null; // the #jobs list of the current page, if it has one
  let jobWatcher = null; // called with each merged job (the run form waits for session_id)
  const jobListeners = new Set(); // also called with each merged job (an approval's buttons)

  function mergeJobs(list) {
    for (const job of list || []) {
      if (!job || !job.id) continue;
      jobs.set(job.id, Object.assign(jobs.get(job.id) || {}, job));
      if (jobWatcher) jobWatcher(jobs.get(job.id));
      for (const listener of [...jobListeners]) listener(jobs.get(job.id));
    }
    renderJobs();
  }

  function jobTarget(job) {
    if (job.kind === 'run') return job.session_id ? shortId(job.session_id) : 'new run';
    return [shortId(job.root), job.name].filter(Boolean).join(' ');
  }

  function renderJobs() {
    if (!jobsView || !jobsView.isConnected) return;
    const sorted = [...jobs.values()].sort((a, b) => (epoch(b.started_at) || 0) - (epoch(a.started_at) || 0));
    const fragment = document.createDocumentFragment();
    for (const job of sorted.slice(0, 50)) fragment.appendChild(jobItem(job));
    clear(jobsView);
    if (!sorted.length) jobsView.appendChild(el('li', { class: 'empty', text: 'no jobs yet' }));
    jobsView.appendChild(fragment);
  }

  function jobItem(job) {
    const sid = job.session_id || job.root;
    const target = sid
      ? el('a', { class: 'target', href: `#/s/${job.root || job.session_id}`, text: jobTarget(job) })
      : el('span', { class: 'target', text: jobTarget(job) });
    return el(
      'li',
      { class: `job job-${job.state}`, dataset: { jobId: job.id } },
      el('span', { class: 'kind', text: job.kind }),
      target,
      el('span', { class: `state st-${job.state}`, text: job.state }),
      el('span', { class: 'exit', text: job.exit_code === null || job.exit_code === undefined ? '' : `exit ${job.exit_code}` }),
      el('span', { class: 'error', text: job.error || '', title: job.error || '' }),
    );
  }

  function jobsSection() {
    jobsView = el('ul', { id: 'jobs', class: 'jobs' });
    renderJobs();
    return el('section', { class: 'jobs-box' }, el('h2', { text: 'Jobs' }), jobsView);
  }

  // ---------------------------------------------------------------- header crumbs

  function setCrumbs(...items) {
    const crumbs = document.getElementById('crumbs');
    clear(crumbs);
    for (const item of items) crumbs.appendChild(item);
  }

  const statusClass = (status) => `s-${String(status).replace(/\s+/g, '-')}`;

  function statusTitle(status) {
    if (status === 'crashed') return 'process died';
    if (status === 'waiting for approval') return 'a tool call waits for your decision';
    return '';
  }

  function statusBadge(status, extraClass) {
    const badge = el('span', { class: `status ${statusClass(status)}${extraClass ? ` ${extraClass}` : ''}`, text: status });
    const title = statusTitle(status);
    if (title) badge.title = title;
    return badge;
  }

  function setStatus(node, status) {
    setText(node, status || '');
    const cls = `status ${statusClass(status)}`;
    if (node.className !== cls) node.className = cls;
    node.title = statusTitle(status);
  }

  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

  // ================================================================ Sessions page

  function sessionsPage(app) {
    let rows = [];
    let info = null;
    let awaitedRun = null; // job id of the run this form started, until it has a session
    setCrumbs(el('span', { text: 'sessions' }));

    const filter = el('input', { id: 'session-filter', type: 'search', placeholder: 'filter by id, status, prompt', autocomplete: 'off' });
    const table = el('table', { id: 'sessions', class: 'grid' });
    const tbody = el('tbody');
    table.appendChild(
      el('thead', null, el('tr', null, ...['session', 'status', 'started', 'members', 'tokens', 'prompt'].map((h, i) => el('th', { class: i >= 2 && i <= 4 ? 'num' : null, text: h })))),
    );
    table.appendChild(tbody);

    const prompt = el('textarea', { id: 'run-prompt', rows: 3, placeholder: 'What should the lead do?', required: true });
    const model = el('input', { id: 'run-model', type: 'text', placeholder: 'model (default)', autocomplete: 'off' });
    const submit = el('button', { id: 'run-submit', type: 'submit', text: 'Start run' });
    const runNote = el('div', { class: 'run-note' });
    const form = el('form', { id: 'run-form', class: 'run-form' }, el('h2', { text: 'New run' }), prompt, el('div', { class: 'row' }, model, submit), runNote);

    app.appendChild(
      el('div', { class: 'sessions-page' },
        el('section', { class: 'sessions-box' }, el('div', { class: 'toolbar' }, el('h1', { text: 'Sessions' }), filter), table),
        el('aside', { class: 'side' }, form, jobsSection())),
    );

    function render() {
      const needle = filter.value.trim().toLowerCase();
      const fragment = document.createDocumentFragment();
      for (const row of rows) {
        const hay = `${row.session_id} ${row.status} ${row.prompt || ''}`.toLowerCase();
        if (needle && !hay.includes(needle)) continue;
        fragment.appendChild(sessionRow(row));
      }
      clear(tbody);
      tbody.appendChild(fragment);
      if (!tbody.firstChild) tbody.appendChild(el('tr', { class: 'empty' }, el('td', { colspan: 6, text: rows.length ? 'no session matches' : 'no sessions yet' })));
      markReady();
    }

    function update(list) {
      rows = list || [];
      render();
    }

    filter.addEventListener('input', render);

    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const text = prompt.value.trim();
      if (!text) return;
      submit.disabled = true;
      const body = { prompt: text };
      if (model.value.trim()) body.model = model.value.trim();
      const job = await control('/api/runs', body);
      submit.disabled = false;
      if (!job) return;
      prompt.value = '';
      awaitedRun = job.id;
      runNote.textContent = 'starting…';
      if (jobWatcher) jobWatcher(job);
    });

    // A run's session id appears in a later `jobs` event: go to its tree then.
    jobWatcher = (job) => {
      if (job.id !== awaitedRun) return;
      if (job.session_id) {
        awaitedRun = null;
        clear(runNote);
        runNote.appendChild(el('a', { href: `#/s/${job.session_id}`, text: `open ${shortId(job.session_id)}` }));
        location.hash = `#/s/${job.session_id}`;
      } else if (job.state === 'failed') {
        awaitedRun = null;
        runNote.textContent = `run failed: ${job.error || ''}`;
      }
    };

    getJSON('/api/info').then((data) => {
      info = data;
      if (info && info.model && !model.value) model.value = info.model;
    }).catch(reportError);
    getJSON('/api/sessions').then((data) => { if (!rows.length) update(data.sessions); }).catch(reportError);
    getJSON('/api/jobs').then((data) => mergeJobs(data.jobs)).catch(() => {});

    const stream = openStream('/api/stream', {
      sessions: (data) => update(data.sessions),
      jobs: (data) => mergeJobs(data.jobs),
    });
    return () => {
      stream.close();
      jobWatcher = null;
    };
  }

  function sessionRow(row) {
    const usage = row.total_usage || {};
    return el(
      'tr',
      { dataset: { sessionId: row.session_id } },
      el('td', { class: 'mono' }, el('a', { class: 'session-link', href: `#/s/${row.session_id}`, title: row.session_id, text: shortId(row.session_id) })),
      el('td', null, statusBadge(row.status), row.held ? el('span', { class: 'held-dot', title: 'held by a live process', text: '●' }) : null),
      el('td', { class: 'num', text: localTime(row.created_at) }),
      el('td', { class: 'num', text: row.members }),
      el('td', { class: 'num', title: `in ${usage.input_tokens || 0} / out ${usage.output_tokens || 0}, ${usage.model_calls || 0} model calls`, text: tokensOf(usage) }),
      el('td', { class: 'prompt', title: row.prompt || '', text: row.prompt || '' }),
    );
  }

  // ================================================================ Tree page

  /**
   * The tree of one root and its member panel. Rows live in a Map by session id, each with
   * its DOM node and cells; an event only touches the rows it carries, once per frame.
   */
  function treePage(app, root) {
    const members = new Map(); // session id -> {data, node, cells}
    const dirty = new Set();
    const running = new Set(); // rows whose elapsed ticks locally
    let order = [];
    let orderDirty = false;
    let firstRendered = false;
    let memberPanel = null;
    let stream = null;
    let streamMember = null;
    let approvals = []; // the requests waiting in this tree, from `approvals` events

    const held = el('span', { id: 'held', class: 'held-no', text: 'not held' });
    const resume = el('button', { id: 'resume-button', type: 'button', text: 'Resume tree', title: 'run the tree until it is quiescent' });
    resume.addEventListener('click', () => control(`/api/sessions/${enc(root)}/resume`, {}));
    const tree = el('div', { id: 'tree', class: 'tree', role: 'list' });
    const treeHead = el('div', { class: 'tree-row tree-head' }, ...['member', 'status', 'turn', 'calls', 'tokens', 'tools'].map((h) => el('span', { text: h })));
    const panelBox = el('section', { class: 'member-box' });

    setCrumbs(
      el('a', { href: '#/', text: 'sessions' }),
      el('span', { class: 'sep', text: '/' }),
      el('span', { class: 'mono', title: root, text: shortId(root) }),
    );
    app.appendChild(
      el('div', { class: 'tree-page' },
        el('section', { class: 'tree-box' },
          el('div', { class: 'toolbar' },
            el('h1', { class: 'mono', title: root, text: `tree ${shortId(root)}` }), held,
            el('span', { class: 'spacer' }),
            el('a', { id: 'timeline-link', class: 'button-link', href: `#/s/${root}/timeline`, text: 'Timeline' }),
            resume),
          treeHead, tree),
        panelBox),
    );

    // One listener for all rows: clicking a row selects its member.
    tree.addEventListener('click', (ev) => {
      const rowNode = ev.target.closest('[data-session-id]');
      if (!rowNode || ev.ctrlKey || ev.metaKey || ev.shiftKey) return; // let the link open a tab
      ev.preventDefault();
      location.hash = `#/s/${root}/m/${rowNode.dataset.sessionId}`;
    });

    const flush = frameCoalescer(() => {
      for (const sid of dirty) paintRow(members.get(sid));
      dirty.clear();
      if (orderDirty) reorder();
      orderDirty = false;
      if (!firstRendered) {
        firstRendered = true;
        markReady();
      }
    });

    function onTree(event) {
      countTreeEvent();
      setText(held, event.held ? 'held' : 'not held');
      held.className = event.held ? 'held-yes' : 'held-no';
      held.title = event.held ? 'a live process holds this tree' : 'no process holds this tree';
      for (const row of event.rows || []) {
        let entry = members.get(row.session_id);
        if (!entry) {
          entry = makeRow(row);
          members.set(row.session_id, entry);
          orderDirty = true; // a new node must be placed
        }
        entry.data = Object.assign(entry.data || {}, row);
        dirty.add(row.session_id);
        if (memberPanel && memberPanel.sid === row.session_id) memberPanel.onRow(entry.data);
      }
      if (event.order) {
        order = event.order;
        orderDirty = true;
      }
      if (Array.isArray(event.approvals)) onApprovals(event.approvals);
      flush();
    }

    /** The tree's waiting requests, sent with a `tree` batch when they changed (and first). */
    function onApprovals(list) {
      approvals = list || [];
      if (memberPanel) memberPanel.onApprovals(approvals);
    }

    function makeRow(row) {
      const cells = {
        name: el('a', { class: 'name' }),
        below: el('span', { class: 'pending-below' }),
        status: el('span', { class: 'status' }),
        elapsed: el('span', { class: 'elapsed' }),
        calls: el('span', { class: 'calls' }),
        tokens: el('span', { class: 'tokens' }),
        tools: el('span', { class: 'tools' }),
      };
      const node = el('div', { class: 'tree-row', role: 'listitem', dataset: { sessionId: row.session_id } },
        el('span', { class: 'name-cell' }, cells.name, cells.below), cells.status, cells.elapsed, cells.calls, cells.tokens, cells.tools);
      cells.name.href = `#/s/${root}/m/${row.session_id}`;
      return { data: null, node, cells };
    }

    /** Write one row's cells; setText skips unchanged ones so most updates are no-ops. */
    function paintRow(entry) {
      const d = entry.data;
      const { node, cells } = entry;
      const name = d.name || d.session_id;
      setAttr(node, 'data-member', name);
      setText(cells.name, name);
      cells.name.title = d.label ? `${name} — ${d.label}` : name;
      const depth = String(d.depth || 0);
      if (node.dataset.depth !== depth) {
        node.dataset.depth = depth;
        node.style.setProperty('--depth', depth);
      }
      setStatus(cells.status, d.status);
      // An ancestor shows how many calls below it wait for a decision.
      const below = d.approvals_below || 0;
      setText(cells.below, below ? `${plural(below, 'approval')} pending below` : '');
      cells.below.title = below ? 'tool calls of members below this one wait for a decision' : '';
      node.classList.toggle('waiting', (d.approvals_pending || 0) > 0);
      node.classList.toggle('crashed', d.status === 'crashed');
      if (d.status === 'crashed') node.title = 'process died';
      else if (node.title) node.title = '';
      node.classList.toggle('selected', !!memberPanel && memberPanel.sid === d.session_id);
      const usage = d.usage || {};
      setText(cells.calls, String(usage.model_calls || 0));
      let tokens = `${usage.input_tokens || 0}/${usage.output_tokens || 0}`;
      if (d.budget_tokens) tokens += ` / ${d.budget_tokens}`;
      setText(cells.tokens, tokens);
      const tools = (d.tools || []).join(', ');
      setText(cells.tools, tools);
      cells.tools.title = tools;
      if (d.status === 'running' && d.turn_start && !d.turn_end) running.add(d.session_id);
      else running.delete(d.session_id);
      paintElapsed(entry, Date.now() / 1000);
    }

    function paintElapsed(entry, now) {
      const d = entry.data;
      let seconds = null;
      if (d.turn_start) {
        const end = d.turn_end || (d.status === 'running' ? now : null);
        if (end) seconds = Math.max(end - d.turn_start, 0);
      }
      setText(entry.cells.elapsed, duration(seconds));
    }

    /**
     * Put nodes in `order`, moving only the ones out of place: appending a child at the
     * end moves nothing else. Members missing from `order` stay, at the end.
     */
    function reorder() {
      let cursor = tree.firstChild;
      const placed = new Set();
      for (const sid of order) {
        const entry = members.get(sid);
        if (!entry) continue;
        placed.add(sid);
        if (entry.node === cursor) cursor = cursor.nextSibling;
        else tree.insertBefore(entry.node, cursor);
      }
      for (const [sid, entry] of members) if (!placed.has(sid) && !entry.node.parentNode) tree.appendChild(entry.node);
    }

    // Running rows tick locally; the server only sends a row when it changes.
    const ticker = setInterval(() => {
      const now = Date.now() / 1000;
      for (const sid of running) paintElapsed(members.get(sid), now);
    }, 1000);

    const retiring = new Set(); // streams replaced by one that has not opened yet

    /** (Re)open the tree stream; with a member, from the seq after its loaded transcript. */
    function connect(member, from) {
      if (stream && streamMember === member && member === null) return;
      const old = stream;
      let url = `/api/sessions/${enc(root)}/stream`;
      if (member) url += `?member=${enc(member)}&from=${from}`;
      streamMember = member;
      stream = openStream(url, {
        tree: onTree,
        records: (data) => {
          if (memberPanel && data.session_id === memberPanel.sid) memberPanel.addRecords(data.records);
        },
        jobs: (data) => mergeJobs(data.jobs),
      }, () => {
        // The old stream goes only once the new one is open: a member stream the server
        // refuses (404) must not leave the tree without updates.
        if (old) old.close();
        retiring.delete(old);
      });
      if (old) retiring.add(old);
    }

    function select(sid) {
      if (memberPanel && memberPanel.sid === sid) return;
      const previous = memberPanel && members.get(memberPanel.sid);
      if (memberPanel) memberPanel.close();
      memberPanel = null;
      clear(panelBox);
      if (previous) previous.node.classList.remove('selected');
      if (!sid) {
        panelBox.appendChild(emptyPanel());
        connect(null, 0);
        return;
      }
      memberPanel = memberView(panelBox, root, sid, members.get(sid) && members.get(sid).data, (from) => connect(sid, from));
      memberPanel.onApprovals(approvals);
      const current = members.get(sid);
      if (current) current.node.classList.add('selected');
      if (!stream) connect(null, 0); // keep the tree live while the transcript loads
    }

    return {
      select,
      teardown() {
        clearInterval(ticker);
        if (memberPanel) memberPanel.close();
        if (stream) stream.close();
        for (const old of retiring) old.close();
        retiring.clear();
      },
    };
  }

  function emptyPanel() {
    return el('div', { id: 'member', class: 'member empty', dataset: { sessionId: '' } },
      el('p', { class: 'hint', text: 'Select a member to see its transcript and controls.' }),
      jobsSection());
  }

  // ================================================================ Member panel

  /**
   * One member's header, details, transcript and controls. `onLoaded(next)` is called once
   * the stored transcript is loaded, so the stream can tail it from `next`.
   */
  function memberView(box, root, sid, row, onLoaded) {
    const seen = new Set();
    let lastSeq = -1;
    let closed = false;
    let mode = row ? row.mode : null;
    let name = row ? row.name : sid;

    const title = el('h2', { id: 'member-name', class: 'mono', text: name });
    const status = el('span', { id: 'member-status', class: 'status' });
    const details = el('dl', { id: 'member-details', class: 'details' });
    const children = el('ul', { id: 'children', class: 'children' });
    const transcript = el('div', { id: 'transcript', class: 'transcript' }, el('p', { class: 'hint loading', text: 'loading transcript…' }));
    const input = el('textarea', { id: 'message-input', rows: 3, placeholder: 'Message this member…' });
    const send = el('button', { id: 'send-button', type: 'button', text: 'Send' });
    const steer = el('button', { id: 'steer-button', type: 'button', text: 'Steer', title: 'deliver into the current turn' });
    const interrupt = el('button', { id: 'interrupt-button', type: 'button', class: 'danger', text: 'Interrupt' });
    const waiting = el('section', { id: 'approvals', class: 'approvals', hidden: true });
    const requests = new Map(); // call id -> {node, sig, deciding}
    const watchers = new Set(); // this panel's job listeners, dropped when it closes

    box.appendChild(
      el('div', { id: 'member', class: 'member', dataset: { sessionId: sid } },
        el('div', { class: 'member-head' }, title, status),
        waiting,
        el('details', { class: 'member-info', open: true },
          el('summary', { text: 'details' }), details, el('h3', { text: 'children' }), children),
        transcript,
        el('div', { class: 'controls' }, input,
          el('div', { class: 'row' }, send, steer, el('span', { class: 'spacer' }), interrupt)),
        jobsSection()),
    );

    function onRow(data) {
      if (data.name) {
        name = data.name;
        setText(title, name);
      }
      setStatus(status, data.status);
      mode = data.mode;
      // A one-shot child takes no messages: the server would answer NOT_RESUMABLE.
      send.disabled = steer.disabled = mode === 'one-shot';
      const why = mode === 'one-shot' ? 'a one-shot child cannot take messages' : '';
      send.title = why;
      steer.title = why || 'deliver into the current turn';
    }
    if (row) onRow(row);

    async function message(kind) {
      const text = input.value;
      if (!text.trim()) return showError('USAGE: the message is empty');
      const job = await control(`/api/sessions/${enc(root)}/${kind}`, { name, message: text });
      if (job) input.value = '';
    }
    send.addEventListener('click', () => message('send'));
    steer.addEventListener('click', () => message('steer'));
    interrupt.addEventListener('click', () => control(`/api/sessions/${enc(root)}/interrupt`, { name }));
    input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey) && !send.disabled) message('send');
    });

    /** This member's waiting requests, from the tree's list; each keeps its node while unchanged. */
    function onApprovals(list) {
      const mine = (list || []).filter((a) => a.session_id === sid);
      const keep = new Set();
      mine.forEach((request, i) => {
        keep.add(request.call_id);
        const sig = `${request.state}|${request.held}|${request.decided_by || ''}`;
        let known = requests.get(request.call_id);
        if (!known || known.sig !== sig) {
          const deciding = !!known && known.deciding;
          const node = approvalNode(request, deciding);
          if (known) known.node.replaceWith(node);
          known = { node, sig, deciding };
          requests.set(request.call_id, known);
        }
        // Moved only when out of place: a reason being typed keeps its focus.
        const at = waiting.children[i] || null;
        if (at !== known.node) waiting.insertBefore(known.node, at);
      });
      for (const [callId, known] of requests) {
        if (keep.has(callId)) continue;
        known.node.remove();
        requests.delete(callId);
      }
      waiting.hidden = !mine.length;
    }

    function approvalNode(request, deciding) {
      const pending = request.state === 'pending';
      const node = el('div', { class: `approval approval-${request.state}`, dataset: { callId: request.call_id, state: request.state } },
        el('div', { class: 'approval-head' },
          el('span', { class: 'label', text: pending ? 'waits for approval' : `${request.state}, applied when the tree runs again` }),
          el('span', { class: 'approval-tool mono', text: request.tool || '?' }),
          el('span', { class: 'muted mono small', text: request.call_id })),
        el('pre', { class: 'args', text: prettyArgs(request.arguments) }),
        el('div', { class: 'approval-meta muted small' },
          el('span', { class: 'approval-reason', text: request.reason || '' }),
          el('span', { text: request.requested_at ? ` · asked ${localTime(request.requested_at)}` : '' }),
          el('span', { class: 'approval-deadline', text: request.deadline ? ` · denied if undecided by ${localTime(request.deadline)}` : '' }),
          el('span', { text: request.decided_by ? ` · by ${request.decided_by}` : '' })));
      if (!pending) {
        if (!request.held) node.appendChild(el('div', { class: 'muted small', text: 'Resume the tree to apply the decision.' }));
        return node;
      }
      const reason = el('input', { class: 'deny-reason', type: 'text', maxlength: 2000, placeholder: 'reason for a denial (optional; the agent reads it)', autocomplete: 'off' });
      const approve = el('button', { class: 'approve-button', type: 'button', text: 'Approve', title: 'the call runs, once' });
      const deny = el('button', { class: 'deny-button danger', type: 'button', text: 'Deny', title: 'the call does not run; the agent is told why' });
      const buttons = [approve, deny];
      const setBusy = (busy) => {
        for (const button of buttons) button.disabled = busy;
        const known = requests.get(request.call_id);
        if (known) known.deciding = busy;
      };
      async function decide(kind) {
        const body = { name: request.name, call_id: request.call_id };
        if (kind === 'deny' && reason.value.trim()) body.reason = reason.value.trim();
        setBusy(true);
        const job = await control(`/api/sessions/${enc(root)}/${kind}`, body);
        if (!job) return setBusy(false); // refused: nothing changed, the request still waits
        // A command that failed decided nothing (its error is in the jobs list): try again.
        const watch = (update) => {
          if (!update || update.id !== job.id || update.state === 'running') return;
          jobListeners.delete(watch);
          watchers.delete(watch);
          if (update.state === 'failed' && !closed) setBusy(false);
        };
        jobListeners.add(watch);
        watchers.add(watch);
        watch(jobs.get(job.id));
      }
      approve.addEventListener('click', () => decide('approve'));
      deny.addEventListener('click', () => decide('deny'));
      reason.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' && !deny.disabled) decide('deny');
      });
      node.appendChild(el('div', { class: 'row' }, approve, reason, deny));
      if (deciding) for (const button of buttons) button.disabled = true;
      return node;
    }

    getJSON(`/api/sessions/${enc(root)}/members/${enc(sid)}`).then((data) => {
      if (closed) return;
      renderDetails(details, children, root, data);
      if (data.row) onRow(data.row);
    }).catch(reportError);

    /** Stored records first, page by page; then the stream tails from `next`. */
    async function load() {
      let from = 0;
      try {
        for (;;) {
          const page = await getJSON(`/api/sessions/${enc(root)}/members/${enc(sid)}/records?from=${from}&limit=${PAGE}`);
          if (closed) return;
          addRecords(page.records);
          from = page.next !== undefined && page.next !== null ? page.next : lastSeq + 1;
          if ((page.records || []).length < PAGE) break;
        }
      } catch (err) {
        reportError(err);
      }
      const loading = transcript.querySelector('.loading');
      if (loading) loading.remove();
      if (!closed) onLoaded(Math.max(from, lastSeq + 1));
    }

    // Follow the tail only while the reader is at the bottom; scrolling up pins the view.
    let stuck = true;
    const atBottom = () => transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40;
    const toBottom = () => { transcript.scrollTop = transcript.scrollHeight; };
    transcript.addEventListener('scroll', () => { stuck = atBottom(); });
    // The details above can grow after the transcript loaded: keep the tail in view then too.
    const resized = new ResizeObserver(() => { if (stuck) toBottom(); });
    resized.observe(transcript);

    function addRecords(records) {
      const stick = stuck;
      const fresh = (records || []).filter((r) => !seen.has(r.seq)).sort((a, b) => a.seq - b.seq);
      const fragment = document.createDocumentFragment();
      for (const record of fresh) {
        seen.add(record.seq);
        const node = renderRecord(record);
        if (!node) continue;
        if (record.seq > lastSeq) fragment.appendChild(node);
        else insertInPlace(transcript, node, record.seq); // a late, older record: rare
      }
      for (const record of fresh) lastSeq = Math.max(lastSeq, record.seq);
      transcript.appendChild(fragment);
      if (stick) toBottom();
    }

    load();
    return {
      sid,
      onRow,
      onApprovals,
      addRecords,
      close() {
        closed = true;
        resized.disconnect();
        for (const watch of watchers) jobListeners.delete(watch);
        watchers.clear();
      },
    };
  }

  function insertInPlace(container, node, seq) {
    for (const other of container.querySelectorAll('.entry')) {
      if (Number(other.dataset.seq) > seq) return container.insertBefore(node, other);
    }
    container.appendChild(node);
  }

  function renderDetails(dl, childList, root, data) {
    clear(dl);
    const budget = data.budget
      ? Object.entries(data.budget).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => `${k.replace('_', ' ')} ${v}`).join(', ')
      : '';
    const items = [
      ['session', data.session_id],
      ['definition', data.definition],
      ['model', data.model],
      ['sandbox', data.sandbox],
      ['budget', budget || 'none'],
      ['cwd', data.cwd],
      ['created', localTime(data.created_at)],
      ['mode', data.row && data.row.mode],
      ['label', data.row && data.row.label],
      ['result schema', data.output_schema ? JSON.stringify(data.output_schema) : null],
    ];
    for (const [key, value] of items) {
      if (value === null || value === undefined || value === '') continue;
      dl.appendChild(el('dt', { text: key }));
      dl.appendChild(el('dd', { class: 'mono', title: String(value), text: String(value) }));
    }
    clear(childList);
    for (const child of data.children || []) {
      childList.appendChild(el('li', null,
        el('a', { class: 'child-link mono', href: `#/s/${root}/m/${child.session_id}`, text: child.name || shortId(child.session_id) }),
        el('span', { class: 'muted', text: ` ${child.mode || ''}${child.label ? ` — ${child.label}` : ''}` })));
    }
    if (!childList.firstChild) childList.appendChild(el('li', { class: 'muted', text: 'none' }));
  }

  // ---------------------------------------------------------------- transcript entries

  /** The frame every entry shares: data-kind, data-seq, a label line and a body. */
  function entryNode(record, cls, label, ...body) {
    const time = epoch(record.time);
    return el('div', { class: `entry ${cls}`, dataset: { kind: record.kind, seq: record.seq } },
      el('div', { class: 'entry-head' },
        el('span', { class: 'label', text: label }),
        el('span', { class: 'when', text: time ? new Date(time * 1000).toLocaleTimeString() : '', title: `seq ${record.seq}` })),
      ...body);
  }

  const textBlock = (text, cls) => el('div', { class: `text${cls ? ` ${cls}` : ''}`, text: text || '' });

  function collapsed(summary, ...body) {
    return el('details', { class: 'fold' }, el('summary', { text: summary }), ...body);
  }

  /** A user-role message's text: its blocks joined as they are, as the model is sent them. */
  function messageText(message) {
    return ((message && message.content) || []).map((b) => (typeof b === 'string' ? b : b.text || '')).join('');
  }

  /** The label a user-role message gets from its source. */
  function sourceLabel(source) {
    const kind = (source && source.kind) || 'user';
    const from = source && source.name ? ` from ${source.name}` : '';
    switch (kind) {
      case 'user': return 'user';
      case 'parent': return `message${from || ' from parent'}`;
      case 'notice': return `notice${from}`;
      case 'runtime': return 'runtime context';
      case 'steer': return `steer${from}`;
      case 'report':
      case 'subagent-report': return `report${from}`;
      case 'subagent-settled': return `settled${from}`;
      default: return `${kind}${from}`;
    }
  }

  function userEntry(record) {
    const message = record.payload.message || {};
    const source = message.source || {};
    const label = sourceLabel(source);
    const text = textBlock(messageText(message));
    // Runtime context repeats every turn and is long: folded by default.
    if (source.kind === 'runtime') return entryNode(record, 'user runtime', label, collapsed('show context', text));
    return entryNode(record, `user src-${source.kind || 'user'}`, label, text);
  }

  function toolCallBlock(name, callId, args) {
    return el('div', { class: 'tool-call' },
      el('div', { class: 'tool-name' }, el('span', { class: 'mono', text: name || '?' }), el('span', { class: 'muted', text: callId ? ` ${callId}` : '' })),
      el('pre', { class: 'args', text: prettyArgs(args) }));
  }

  function assistantEntry(record) {
    const p = record.payload;
    const body = [];
    for (const block of (p.message && p.message.content) || []) {
      if (block.kind === 'text') body.push(textBlock(block.text));
      else if (block.kind === 'reasoning') body.push(collapsed('reasoning', textBlock(block.text, 'reasoning')));
      else if (block.kind === 'tool-call') body.push(toolCallBlock(block.name, block.id, block.arguments));
      else body.push(textBlock(`${block.kind}: ${compactJson(block)}`, 'muted'));
    }
    let label = 'assistant';
    if (p.usage) label += ` · ${p.usage.input_tokens || 0}/${p.usage.output_tokens || 0} tokens`;
    return entryNode(record, 'assistant', label, ...body);
  }

  function toolResultEntry(record) {
    const m = record.payload.message || {};
    const label = `${m.is_error ? 'error from' : 'result of'} ${m.name || 'tool'}${record.payload.code ? ` (${record.payload.code})` : ''}`;
    const content = typeof m.content === 'string' ? m.content : compactJson(m.content);
    const body = el('pre', { class: 'text result', text: content });
    // Long results fold so the conversation stays readable.
    const shown = content.length > 1500 ? collapsed(`${content.length} characters`, body) : body;
    return entryNode(record, `tool-result${m.is_error ? ' is-error' : ''}`, label, shown);
  }

  function turnEndEntry(record) {
    const p = record.payload;
    const failed = p.error_code || p.error_message;
    const node = entryNode(record, `separator turn-end${failed ? ' is-error' : ''}`, `turn ${p.turn || ''} ended: ${p.reason || ''}`);
    if (failed) node.appendChild(textBlock(`${p.error_code || ''}${p.error_message ? `: ${p.error_message}` : ''}`));
    return node;
  }

  function queuedEntry(record) {
    const inserted = record.payload.inserted || [];
    const node = entryNode(record, 'queued', `queued input (${record.payload.target || 'inbox'})`);
    for (const m of inserted) node.appendChild(textBlock(`${sourceLabel(m.source)}: ${messageText(m)}`, 'muted'));
    return node;
  }

  function genericEntry(record, cls) {
    return entryNode(record, cls || 'generic', record.kind, textBlock(compactJson(record.payload), 'mono small'));
  }

  /** One record to one entry (or null for records not worth a line). */
  function renderRecord(record) {
    const p = record.payload || {};
    record.payload = p;
    try {
      switch (record.kind) {
        case 'user/message': return userEntry(record);
        case 'assistant/message': return assistantEntry(record);
        case 'tool/call': return entryNode(record, 'tool-dispatch', `calling ${p.name || 'tool'}`, el('span', { class: 'muted mono small', text: p.call_id || '' }));
        case 'tool/result': return toolResultEntry(record);
        case 'turn/start': return entryNode(record, 'separator turn-start', `turn ${p.turn || ''} started`);
        case 'turn/end': return turnEndEntry(record);
        case 'step/start':
        case 'step/end': return null; // the steps are visible from the messages themselves
        case 'agent/inbox/spliced': return queuedEntry(record);
        case 'request/header':
          return entryNode(record, 'header', `request ${p.reason || ''} · ${p.model || ''}`,
            collapsed('system prompt', textBlock(p.system || '', 'small')),
            (p.tools && p.tools.length) ? el('div', { class: 'muted small', text: `tools: ${p.tools.join(', ')}` }) : null);
        case 'subagent/catalog':
          return entryNode(record, 'catalog', `created ${p.mode || ''} child ${p.name || shortId(p.child_id)}`, p.label ? textBlock(p.label, 'muted') : null);
        case 'sandbox/mode': return entryNode(record, 'meta', `sandbox: ${p.mode || ''}`);
        case 'tool/approval-requested':
          return entryNode(record, 'approval-asked', `${p.name || 'tool'} call waits for approval (${p.reason || 'gated'})`,
            el('span', { class: 'muted mono small', text: p.call_id || '' }));
        case 'tool/approval-decided':
          return entryNode(record, `approval-decided${p.approved ? '' : ' is-error'}`,
            `${p.approved ? 'approved' : 'denied'} by ${p.by || '?'}`,
            el('span', { class: 'muted mono small', text: p.call_id || '' }),
            p.reason ? textBlock(p.reason) : null);
        case 'model/error': return genericEntry(record, 'is-error model-error');
        default: return genericEntry(record);
      }
    } catch (_) {
      return genericEntry(record); // an unexpected shape still shows
    }
  }

  // ================================================================ Timeline page

  const LANE = 14;
  const LABEL_W = 220;

  function timelinePage(app, root) {
    let inflight = false;
    let lastFetch = 0;
    let timer = null;
    let closed = false;

    setCrumbs(
      el('a', { href: '#/', text: 'sessions' }),
      el('span', { class: 'sep', text: '/' }),
      el('a', { class: 'mono', href: `#/s/${root}`, title: root, text: shortId(root) }),
      el('span', { class: 'sep', text: '/' }),
      el('span', { text: 'timeline' }),
    );
    const axis = svg('svg', { id: 'timeline-axis', class: 'axis', height: 22 });
    const chart = svg('svg', { id: 'timeline-svg' });
    const usage = svg('svg', { id: 'usage-chart' });
    const box = el('div', { id: 'timeline', class: 'timeline' },
      el('div', { class: 'toolbar' }, el('h1', { text: `timeline ${shortId(root)}` }), el('span', { class: 'spacer' }),
        el('a', { class: 'button-link', href: `#/s/${root}`, text: 'Tree' })),
      el('div', { class: 'timeline-scroll' }, axis, chart),
      el('h2', { text: 'Tokens per member' }),
      el('div', { class: 'usage-scroll' }, usage));
    app.appendChild(box);
    const lanesView = timelineView(axis, chart);
    const usageView = usageChartView(usage);

    let openSpans = false; // the last picture had a turn or call still open

    async function refresh() {
      if (inflight || closed) return;
      inflight = true;
      lastFetch = Date.now();
      try {
        const data = await getJSON(`/api/sessions/${enc(root)}/timeline`);
        openSpans = (data.lanes || []).some((lane) =>
          [...(lane.turns || []), ...(lane.calls || [])].some((span) => span.end === null));
        if (!closed) {
          const width = Math.max(box.clientWidth - 24, 700);
          lanesView.draw(data, width);
          usageView.draw(data.lanes || [], width);
          markReady();
        }
      } catch (err) {
        reportError(err);
      } finally {
        inflight = false;
      }
    }

    /** At most one fetch a second, and always one after the last event of a burst. */
    function schedule() {
      if (timer) return;
      const wait = Math.max(0, 1000 - (Date.now() - lastFetch));
      timer = setTimeout(() => {
        timer = null;
        refresh();
      }, wait);
    }

    refresh();
    const stream = openStream(`/api/sessions/${enc(root)}/stream`, {
      tree: () => {
        countTreeEvent();
        schedule();
      },
      jobs: (data) => mergeJobs(data.jobs),
    });
    // Open bars grow with the clock, not only when an event arrives: while something runs,
    // the picture is fetched again every two seconds.
    const grow = setInterval(() => {
      if (openSpans) schedule();
    }, 2000);
    return () => {
      closed = true;
      clearTimeout(timer);
      clearInterval(grow);
      stream.close();
    };
  }

  /** A tick step in seconds giving roughly `count` ticks across `span`. */
  function tickStep(span, count) {
    const steps = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
    for (const step of steps) if (span / step <= count) return step;
    return Math.ceil(span / count / 86400) * 86400;
  }

  /** A `<title>` child: the browser shows it as the hover tooltip. */
  function titled(node, text) {
    const title = svg('title');
    title.textContent = text;
    node.appendChild(title);
    return node;
  }

  /** A bar from `start` to `end` (now while open), with its label and duration on hover. */
  function spanRect(cls, span, x, now, y, h, laneName, fallback) {
    const open = span.end === null || span.end === undefined;
    const end = open ? now : span.end;
    const rect = svg('rect', { class: `${cls}${open ? ' open' : ''}`, x: x(span.start), y, width: Math.max(x(end) - x(span.start), 1), height: h });
    return titled(rect, `${laneName}: ${span.label || fallback} · ${duration(end - span.start)}${open ? ' (open)' : ''}`);
  }

  /**
   * The lanes chart, kept across refreshes. The time domain has headroom, so a refresh where
   * `now` moved does not move any bar: only lanes whose spans changed (or are still open) are
   * rebuilt. A full redraw happens when the domain or the width changes, or lanes are added.
   */
  function timelineView(axis, chart) {
    let domain = null; // {start, end, width, count}
    const lanes = new Map(); // session id -> {g, sig}
    let linksSig = '';
    let linksGroup = null;

    function draw(data, width) {
      const list = data.lanes || [];
      const now0 = epoch(data.now) ?? Date.now() / 1000;
      const start = epoch(data.start) ?? now0;
      const now = Math.max(now0, start + 0.001);
      if (!domain || now > domain.end || width !== domain.width || list.length !== domain.count) {
        const span = (now - start) * 1.25 + 1; // headroom: redraw all about every quarter
        domain = { start, end: start + span, width, count: list.length };
        full(list, data.links || [], now);
      } else {
        partial(list, data.links || [], now);
      }
    }

    function scale() {
      const plotW = Math.max(domain.width - LABEL_W - 10, 200);
      const x = (t) => LABEL_W + ((Math.min(t, domain.end) - domain.start) / (domain.end - domain.start)) * plotW;
      return { x, plotW };
    }

    /** A lane's signature: open spans include `now`, since they grow with it. */
    function signature(lane, i, now) {
      const open = [...(lane.turns || []), ...(lane.calls || [])].some((s) => s.end === null || s.end === undefined);
      return `${i}|${lane.name}|${lane.status}|${open ? Math.round(now * 10) : ''}|${JSON.stringify(lane.turns)}|${JSON.stringify(lane.calls)}`;
    }

    function full(list, links, now) {
      const { x, plotW } = scale();
      const height = list.length * LANE + 4;
      drawAxis(x, plotW, height);
      const fragment = document.createDocumentFragment();
      fragment.appendChild(svg('defs', null, svg('clipPath', { id: 'label-clip' }, svg('rect', { x: 0, y: 0, width: LABEL_W - 8, height: LANE }))));
      fragment.appendChild(gridLines(x, height));
      lanes.clear();
      list.forEach((lane, i) => {
        const g = drawLane(lane, i, x, LABEL_W + plotW + 10, now);
        lanes.set(lane.session_id, { g, sig: signature(lane, i, now) });
        fragment.appendChild(g);
      });
      linksGroup = drawLinks(links, list, x);
      linksSig = JSON.stringify(links);
      fragment.appendChild(linksGroup);
      clear(chart);
      chart.setAttribute('width', domain.width);
      chart.setAttribute('height', height);
      chart.setAttribute('viewBox', `0 0 ${domain.width} ${height}`);
      chart.appendChild(fragment);
    }

    function partial(list, links, now) {
      const { x, plotW } = scale();
      list.forEach((lane, i) => {
        const sig = signature(lane, i, now);
        const known = lanes.get(lane.session_id);
        if (known && known.sig === sig) return;
        const g = drawLane(lane, i, x, LABEL_W + plotW + 10, now);
        if (known) chart.replaceChild(g, known.g);
        else chart.insertBefore(g, linksGroup);
        lanes.set(lane.session_id, { g, sig });
      });
      const sig = JSON.stringify(links);
      if (sig !== linksSig) {
        const next = drawLinks(links, list, x);
        chart.replaceChild(next, linksGroup);
        linksGroup = next;
        linksSig = sig;
      }
    }

    // The axis is its own svg so it stays at the top (sticky) while the lanes scroll.
    function drawAxis(x, plotW, height) {
      clear(axis);
      axis.setAttribute('width', domain.width);
      const step = tickStep(domain.end - domain.start, Math.max(2, Math.floor(plotW / 90)));
      for (let t = 0; t <= domain.end - domain.start + 1e-9; t += step) {
        const gx = x(domain.start + t);
        axis.appendChild(svg('line', { x1: gx, x2: gx, y1: 15, y2: 22, class: 'tick' }));
        axis.appendChild(svg('text', { x: gx + 2, y: 12, class: 'tick-label', text: `+${duration(t)}` }));
      }
      axis.appendChild(svg('text', { x: 4, y: 12, class: 'tick-label', text: `start ${new Date(domain.start * 1000).toLocaleTimeString()}` }));
    }

    function gridLines(x, height) {
      const grid = svg('g', { class: 'grid' });
      const step = tickStep(domain.end - domain.start, Math.max(2, Math.floor((domain.width - LABEL_W) / 90)));
      for (let t = 0; t <= domain.end - domain.start + 1e-9; t += step) {
        const gx = x(domain.start + t);
        grid.appendChild(svg('line', { x1: gx, x2: gx, y1: 0, y2: height, class: 'gridline' }));
      }
      return grid;
    }

    return { draw };
  }

  /** One elbow per delegation: down from the parent's call to the child's lane at its birth. */
  function drawLinks(links, lanes, x) {
    const index = new Map(lanes.map((lane, i) => [lane.session_id, i]));
    const group = svg('g', { class: 'links' });
    for (const link of links) {
      const pi = index.get(link.parent);
      const ci = index.get(link.child);
      if (pi === undefined || ci === undefined) continue;
      const parent = lanes[pi];
      const call = link.call_id && (parent.calls || []).find((c) => c.call_id === link.call_id);
      const x1 = x(call ? call.start : epoch(link.at));
      const x2 = Math.max(x(epoch(link.at)), x1 + 3);
      const y1 = pi * LANE + LANE / 2;
      const y2 = ci * LANE + LANE / 2;
      const path = svg('path', { class: 'link', d: `M${x1},${y1} V${y2} H${x2}`, dataset: { parent: parent.name, child: lanes[ci].name } });
      group.appendChild(titled(path, `${parent.name} started ${lanes[ci].name}`));
    }
    return group;
  }

  function drawLane(lane, i, x, fullW, now) {
    const g = svg('g', { class: `lane lane-${lane.status}`, transform: `translate(0,${i * LANE})`, dataset: { member: lane.name, sessionId: lane.session_id } });
    g.appendChild(svg('rect', { class: `lane-bg${i % 2 ? ' odd' : ''}`, x: 0, y: 0, width: fullW, height: LANE }));
    g.appendChild(titled(svg('text', { class: 'lane-label', x: 4, y: LANE - 3, 'clip-path': 'url(#label-clip)', text: lane.name }), `${lane.name} (${lane.status})`));
    for (const turn of lane.turns || []) g.appendChild(spanRect('turn', turn, x, now, 1, LANE - 2, lane.name, 'turn'));
    for (const call of lane.calls || []) g.appendChild(spanRect('call', call, x, now, 4, LANE - 8, lane.name, 'tool call'));
    return g;
  }

  /**
   * Horizontal bars of input+output tokens per member, in lane order. Bars are kept and
   * their attributes updated; the chart is rebuilt only when the members change.
   */
  function usageChartView(chart) {
    let key = '';
    let bars = [];

    function build(lanes, width) {
      const height = lanes.length * LANE + 4;
      const labels = svg('g', { 'clip-path': 'url(#usage-clip)' });
      const group = svg('g');
      bars = lanes.map((lane, i) => {
        const y = i * LANE;
        labels.appendChild(svg('text', { class: 'lane-label', x: 4, y: y + LANE - 3, text: lane.name }));
        const title = svg('title');
        const rect = svg('rect', { class: 'usage-bar', x: LABEL_W, y: y + 2, width: 0, height: LANE - 4, dataset: { member: lane.name } }, title);
        const value = svg('text', { class: 'usage-value', x: LABEL_W + 4, y: y + LANE - 3 });
        group.append(rect, value);
        return { rect, title, value };
      });
      clear(chart);
      chart.setAttribute('width', width);
      chart.setAttribute('height', height);
      chart.appendChild(svg('defs', null, svg('clipPath', { id: 'usage-clip' }, svg('rect', { x: 0, y: 0, width: LABEL_W - 8, height }))));
      chart.append(labels, group);
    }

    function draw(lanes, width) {
      const nextKey = `${width}|${lanes.map((l) => `${l.session_id}:${l.name}`).join(',')}`;
      if (nextKey !== key) build(lanes, width);
      key = nextKey;
      const max = Math.max(1, ...lanes.map((l) => tokensOf(l.usage)));
      const barW = Math.max(width - LABEL_W - 90, 100);
      lanes.forEach((lane, i) => {
        const u = lane.usage || {};
        const total = tokensOf(u);
        const w = (total / max) * barW;
        const { rect, title, value } = bars[i];
        setAttr(rect, 'width', String(Math.max(w, total ? 1 : 0)));
        setText(title, `${lane.name}: ${total} tokens (in ${u.input_tokens || 0}, out ${u.output_tokens || 0}), ${u.model_calls || 0} model calls`);
        setAttr(value, 'x', String(LABEL_W + w + 4));
        setText(value, String(total));
      });
    }

    return { draw };
  }

  // ================================================================ router

  const app = document.getElementById('app');
  let current = null; // {key, teardown, select?}

  /** A hash part decoded; a malformed escape (`%E0`) stays as it is rather than throwing. */
  function safeDecode(part) {
    try {
      return decodeURIComponent(part);
    } catch (_) {
      return part;
    }
  }

  /** '#/s/ROOT/m/SID' -> {page: 'tree', root, member}. */
  function parseRoute(hash) {
    const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(safeDecode);
    if (parts[0] === 's' && parts[1]) {
      if (parts[2] === 'timeline') return { page: 'timeline', root: parts[1] };
      if (parts[2] === 'm' && parts[3]) return { page: 'tree', root: parts[1], member: parts[3] };
      return { page: 'tree', root: parts[1], member: null };
    }
    return { page: 'sessions' };
  }

  function route() {
    const r = parseRoute(location.hash);
    const key = `${r.page}:${r.root || ''}`;
    // Moving between members of the same tree keeps the tree and its rows.
    if (current && current.key === key && current.select) {
      current.select(r.member);
      return;
    }
    if (current) current.teardown();
    clear(app);
    jobsView = null;
    jobWatcher = null;
    window.scrollTo(0, 0);
    if (r.page === 'tree') {
      const page = treePage(app, r.root);
      current = { key, teardown: page.teardown, select: page.select };
      page.select(r.member);
    } else if (r.page === 'timeline') {
      current = { key, teardown: timelinePage(app, r.root) };
    } else {
      current = { key, teardown: sessionsPage(app) };
    }
  }

  document.body.dataset.treeEvents = '0';
  window.addEventListener('hashchange', route);
  route();
})();
