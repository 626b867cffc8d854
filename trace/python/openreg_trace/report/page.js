// The report page: reads the embedded data (computed by libopenreg_trace) and
// draws it. No analysis happens here: tables, steps, gaps, memory and ranks
// come ready-made; the timeline only decodes the packed events and draws them.
(function () {
  'use strict';
  const T_START = performance.now();
  const DATA = JSON.parse(document.getElementById('report-data').textContent);
  const T_PARSED = performance.now();
  // The page's address says which view and which trace (of a folder of rank traces): #view&trace=N.
  const HASH = new URLSearchParams(location.hash.slice(1).replace(/^([a-z]+)(&|$)/, 'view=$1$2'));
  const MAIN = Math.min(Math.max(0, parseInt(HASH.get('trace') || '0', 10) || 0), DATA.traces.length - 1);
  const TRACE = DATA.traces[MAIN];
  const S = TRACE.summary, R = TRACE.report;
  const state = (window.__report = { ready: false, views: {}, errors: [] });
  if (window.Chart) { Chart.defaults.animation = false; Chart.defaults.font.size = 11; Chart.defaults.maintainAspectRatio = false; }
  const COLORS = { device: '#3b82f6', communication: '#f59e0b', host: '#8b5cf6', idle: '#cbd5e1' };

  // ------------------------------------------------------------ formatting
  function fmtNs(ns) {
    if (ns == null || isNaN(ns)) return '–';
    const a = Math.abs(ns);
    // toFixed keeps the sign of a value that rounds to zero ("-0"): an axis near 0 would read "-0 ms".
    const fixed = (v, d) => { const t = v.toFixed(d); return /^-0(\.0*)?$/.test(t) ? t.slice(1) : t; };
    if (a >= 1e9) return fixed(ns / 1e9, a >= 1e10 ? 1 : 2) + ' s';
    if (a >= 1e6) return fixed(ns / 1e6, a >= 1e8 ? 0 : a >= 1e7 ? 1 : 2) + ' ms';
    if (a >= 1e3) return fixed(ns / 1e3, a >= 1e5 ? 0 : a >= 1e4 ? 1 : 2) + ' µs';
    return fixed(ns, 0) + ' ns';
  }
  function fmtBytes(b) {
    if (b == null) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']; let i = 0, v = Math.abs(b);
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (b < 0 ? '-' : '') + (i ? v.toFixed(v >= 100 ? 0 : 1) : v) + ' ' + u[i];
  }
  // The unit a curve reads best in: the largest power of 1024 at most its maximum.
  function byteUnit(max) {
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']; let i = 0;
    while (i < u.length - 1 && Math.abs(max) >= 1024 ** (i + 1)) i++;
    return { name: u[i], bytes: 1024 ** i };
  }
  const pct = (x) => (x == null ? '–' : (100 * x).toFixed(1) + ' %');
  // Small shares of a peak keep two digits (a simulated device runs far below its declared peak).
  const share = (x) => (x == null ? '–' : x > 0 && x < 0.01 ? (100 * x).toPrecision(2) + ' %' : pct(x));
  // A count or rate with a decimal prefix: 524.3 MFLOP/s, 25.00 GB/s.
  function fmtSi(x, unit) {
    if (x == null) return '–';
    const p = [['E', 1e18], ['P', 1e15], ['T', 1e12], ['G', 1e9], ['M', 1e6], ['k', 1e3]].find(([, v]) => Math.abs(x) >= v);
    return (p ? (x / p[1]).toPrecision(4) + ' ' + p[0] : (Number.isInteger(x) ? String(x) : x.toPrecision(3)) + ' ') + unit;
  }
  const fmtInt = (n) => (n == null ? '–' : Number(n).toLocaleString('en-US'));
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === 'class') e.className = attrs[k];
      else if (k === 'text') e.textContent = attrs[k];
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    for (const c of kids) if (c != null) e.append(c);
    return e;
  }
  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------ tables
  // columns: {key, label, num, fmt, cls}; sortable by clicking a header, filtered by the text box.
  function table(container, columns, rows, opts) {
    opts = opts || {};
    const limit = opts.limit || 2000;
    let sortKey = opts.sort || null, sortDir = -1, filter = '';
    const input = opts.filter === false ? null : el('input', { class: 'filter', type: 'search', placeholder: 'filter rows…' });
    const scroll = el('div', { class: 'table-scroll' });
    const info = el('div', { class: 'note' });
    const tbl = el('table', opts.id ? { id: opts.id } : {});
    const thead = el('thead'), tbody = el('tbody');
    const tr = el('tr');
    columns.forEach((c) => {
      const th = el('th', { class: c.num ? 'num' : '', text: c.label, 'data-key': c.key });
      th.addEventListener('click', () => { sortDir = sortKey === c.key ? -sortDir : c.num ? -1 : 1; sortKey = c.key; render(); });
      tr.append(th);
    });
    thead.append(tr); tbl.append(thead, tbody); scroll.append(tbl);
    if (input) { input.addEventListener('input', () => { filter = input.value.toLowerCase(); render(); }); container.append(input); }
    container.append(scroll, info);
    function render() {
      let shown = rows;
      if (filter) shown = rows.filter((r) => columns.some((c) => !c.num && String(r[c.key] == null ? '' : r[c.key]).toLowerCase().includes(filter)));
      if (sortKey) {
        shown = shown.slice().sort((a, b) => {
          const x = a[sortKey], y = b[sortKey];
          if (x == null && y == null) return 0; if (x == null) return 1; if (y == null) return -1;
          return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
        });
      }
      thead.querySelectorAll('th').forEach((th) => { th.classList.toggle('sorted-asc', th.dataset.key === sortKey && sortDir > 0); th.classList.toggle('sorted-desc', th.dataset.key === sortKey && sortDir < 0); });
      const frag = document.createDocumentFragment();
      for (const r of shown.slice(0, limit)) {
        const row = el('tr');
        for (const c of columns) {
          const v = r[c.key];
          const text = c.fmt ? c.fmt(v, r) : v == null ? '–' : String(v);
          const cls = (c.num ? 'num ' : '') + (c.cls || '') + (c.onclick ? ' jump' : '');
          // Long names and shapes show two lines, the whole text on hover (the cell's text stays whole).
          const clipped = /\b(name|clip)\b/.test(cls);
          const hover = c.num ? String(v) : [clipped ? text : '', c.onclick ? c.hint || '' : ''].filter(Boolean).join('\n');
          const td = clipped ? el('td', { class: cls, title: hover }, el('div', { class: 'clip', text })) : el('td', { class: cls, text, title: hover });
          if (c.onclick) td.addEventListener('click', () => c.onclick(r));
          row.append(td);
        }
        frag.append(row);
      }
      tbody.replaceChildren(frag);
      info.textContent = `${fmtInt(shown.length)} of ${fmtInt(rows.length)} rows` + (shown.length > limit ? ` (first ${limit} shown)` : '');
      tbl.dataset.rows = String(shown.length);
    }
    render();
    return { render, tbl };
  }

  // ------------------------------------------------------------ views
  const built = {};
  // `push`: a step the browser's Back returns from (tab clicks); the address follows the view either way.
  function show(view, push) {
    const btn = document.querySelector(`nav button[data-view="${view}"]`);
    if (!btn || btn.disabled) view = 'overview';
    document.querySelectorAll('nav button').forEach((b) => b.classList.toggle('active', b.dataset.view === view));
    document.querySelectorAll('.view').forEach((v) => v.classList.toggle('active', v.id === 'view-' + view));
    if (!built[view]) {
      built[view] = true;
      try { BUILD[view](); } catch (e) { state.errors.push(String(e && e.stack || e)); throw e; }
    }
    state.view = view;
    if (view === 'timeline' && timeline) timeline.resize();
    const hash = '#' + view + (MAIN ? '&trace=' + MAIN : '');
    if (location.hash !== hash) history[push ? 'pushState' : 'replaceState'](null, '', hash);
  }
  // Back, Forward or an edited address: the view it names (another trace's views need the page anew).
  window.addEventListener('popstate', () => {
    const h = new URLSearchParams(location.hash.slice(1).replace(/^([a-z]+)(&|$)/, 'view=$1$2'));
    if ((parseInt(h.get('trace') || '0', 10) || 0) !== MAIN) location.reload();
    else show(h.get('view') || 'overview');
  });

  function buildOverview() {
    const label = (i) => { const c = DATA.traces[i].summary.communication; return (c && c.rank != null ? `rank ${c.rank} · ` : '') + DATA.meta.traces[i].path.split('/').pop(); };
    if (DATA.traces.length > 1) {  // each trace's views: the page reopens on the one chosen
      const select = el('select', { id: 'trace-select', title: 'which trace the views show' }, ...DATA.traces.map((t, i) => el('option', { value: String(i), text: label(i) })));
      select.value = String(MAIN);
      select.addEventListener('change', () => { history.replaceState(null, '', `#${state.view}&trace=${select.value}`); location.reload(); });
      $('trace-name').replaceChildren(select);
    } else $('trace-name').textContent = label(0);
    const steps = R.steps || [];
    const stepNs = steps.length ? steps.reduce((a, s) => a + s.duration_ns, 0) / steps.length : null;
    const util = (S.devices || []).length ? S.devices.reduce((a, d) => a + d.utilization, 0) / S.devices.length : null;
    const mem = (S.memory || [])[0];
    const cards = [
      ['Events', fmtInt(S.trace.events)],
      ['Window', fmtNs(S.window ? S.window.duration_ns : null)],
      [steps.length && steps[0].name !== 'window' ? `Step time${R.step_clock === 'device' ? ' on the device' : ''} (mean of ${steps.length})` : 'Profiled span', fmtNs(stepNs)],
      ['Device time', fmtNs(S.device_total_ns)],
      ['Device utilisation', pct(util)],
      ['Kernels (distinct)', fmtInt(S.kernel_names)],
      ['Linked to an op', pct(S.links ? S.links.share : null)],
      ['Memory peak', mem ? fmtBytes(mem.peak_bytes) : '–'],
    ];
    $('cards').replaceChildren(...cards.map(([k, v]) => el('div', { class: 'card' }, el('div', { class: 'v', text: v }), el('div', { class: 'k', text: k }))));

    // Steps, stacked: what the device did during each, and what filled its idle time.
    if (steps.length && window.Chart) {
      // More steps than a chart can show apart: each bar is the mean of consecutive steps (the table of
      // every step is the library's; only the drawing is binned).
      const per = Math.ceil(steps.length / 240), bars = [];
      for (let i = 0; i < steps.length; i += per) {
        const group = steps.slice(i, i + per), mean = (f) => group.reduce((a, s) => a + s[f], 0) / group.length;
        const votes = {};
        group.forEach((s) => (votes[s.bound_by] = (votes[s.bound_by] || 0) + 1));
        bars.push({ name: group.length > 1 ? `${group[0].name.replace('ProfilerStep#', '')}–${group[group.length - 1].name.replace('ProfilerStep#', '')}` : group[0].name,
          device_ns: mean('device_ns'), communication_ns: mean('communication_ns'), host_ns: mean('host_ns'), idle_ns: mean('idle_ns'),
          bound_by: Object.entries(votes).sort((a, b) => b[1] - a[1])[0][0] + (group.length > 1 ? ` (mean of ${group.length} steps)` : '') });
      }
      const ds = [['device', 'device_ns', 'device compute'], ['communication', 'communication_ns', 'exposed communication'], ['host', 'host_ns', 'host (device idle, host busy)'], ['idle', 'idle_ns', 'idle']];
      new Chart($('steps-chart'), {
        type: 'bar',
        data: { labels: bars.map((s) => s.name.replace('ProfilerStep', 'step ')), datasets: ds.map(([k, f, label]) => ({ label, data: bars.map((s) => s[f] / 1e6), backgroundColor: COLORS[k] })) },
        options: { scales: { x: { stacked: true }, y: { stacked: true, title: { display: true, text: per > 1 ? `ms (mean of ${per} steps per bar)` : 'ms' } } },
          plugins: { tooltip: { callbacks: { footer: (items) => 'bound by ' + bars[items[0].dataIndex].bound_by } } } },
      });
      const counts = {};
      steps.forEach((s) => (counts[s.bound_by] = (counts[s.bound_by] || 0) + 1));
      $('steps-note').replaceChildren('Bound by: ', ...Object.entries(counts).map(([k, n]) => el('span', {}, el('span', { class: 'bound ' + k, text: k }), ` ${n} step${n > 1 ? 's' : ''}  `)),
        ...(R.steps_note ? [el('div', { class: 'note', text: 'Steps: ' + R.steps_note })] : []),
        ...(R.step_clock_note ? [el('div', { class: 'note', id: 'step-clock-note', text: 'Step time: ' + R.step_clock_note })] : []));
      const box = el('div', { class: 'steps-table' });
      $('steps-note').after(box);
      table(box, [
        { key: 'name', label: 'step', cls: 'mono' }, { key: 'duration_ns', label: R.step_clock === 'device' ? 'duration (device span)' : 'duration (host range)', num: true, fmt: fmtNs },
        { key: 'host_duration_ns', label: 'host range', num: true, fmt: fmtNs }, { key: 'lag_ns', label: 'device behind by', num: true, fmt: fmtNs },
        { key: 'device_ns', label: 'device', num: true, fmt: fmtNs }, { key: 'communication_ns', label: 'exposed comm.', num: true, fmt: fmtNs },
        { key: 'host_ns', label: 'host', num: true, fmt: fmtNs }, { key: 'idle_ns', label: 'idle', num: true, fmt: fmtNs },
        { key: 'bound_by', label: 'bound by', fmt: (v) => v },
      ], steps, { filter: false, id: 'steps', limit: 100 });
    }

    // Streams.
    const streams = S.streams || [];
    if (streams.length && window.Chart) {
      // A labelled bar per stream: the chart grows with them (Chart.js would skip labels in a fixed height).
      $('streams-chart').parentElement.style.height = Math.max(200, 40 + 22 * streams.length) + 'px';
      new Chart($('streams-chart'), {
        type: 'bar',
        data: { labels: streams.map((s) => `dev ${s.device} · ${s.name || 'stream ' + s.stream}`.trim()), datasets: [{ label: 'busy share of the device span', data: streams.map((s) => 100 * s.utilization), backgroundColor: COLORS.device }] },
        options: { indexAxis: 'y', scales: { x: { min: 0, max: 100, title: { display: true, text: '%' } }, y: { ticks: { autoSkip: false } } }, plugins: { legend: { display: false } } },
      });
    } else $('streams-chart').parentElement.replaceWith(el('div', { class: 'note', text: 'No device work in this trace.' }));

    // Temporal and idle breakdowns (HTA's).
    const tmp = S.temporal || {}, bd = $('breakdown');
    if (tmp.kernel_time_ns) {
      const parts = [['compute', tmp.compute_share, COLORS.device], ['non-compute', tmp.non_compute_share, COLORS.communication], ['idle', tmp.idle_share, COLORS.idle]];
      bd.append(el('div', { class: 'note', text: 'From the first device event to the last (' + fmtNs(tmp.kernel_time_ns) + '):' }),
        el('div', { class: 'bar' }, ...parts.map(([, v, c]) => el('div', { style: `width:${100 * v}%;background:${c}` }))),
        el('div', { class: 'legend' }, ...parts.map(([k, v, c]) => el('span', {}, el('i', { style: 'background:' + c }), `${k} ${pct(v)}`))));
      const ib = S.idle_breakdown && S.idle_breakdown.total;
      if (ib && ib.idle_ns) {
        const p2 = [['host wait', ib.host_wait_share, COLORS.host], ['kernel wait', ib.kernel_wait_share, COLORS.communication], ['other', ib.other_share, COLORS.idle]];
        bd.append(el('div', { class: 'note', text: 'Device idle time, summed over streams (' + fmtNs(ib.idle_ns) + '), by cause (HTA\'s idle time breakdown):' }),
          el('div', { class: 'bar' }, ...p2.map(([, v, c]) => el('div', { style: `width:${100 * v}%;background:${c}` }))),
          el('div', { class: 'legend' }, ...p2.map(([k, v, c]) => el('span', {}, el('i', { style: 'background:' + c }), `${k} ${pct(v)}`))));
      }
      const comm = S.communication;
      if (comm && comm.comm_ns) bd.append(el('div', { class: 'note', text: `Communication ${fmtNs(comm.comm_ns)}, ${pct(comm.overlap_share)} overlapped with compute, ${fmtNs(comm.exposed_ns)} exposed.` }));
      const l = S.launches;
      if (l && l.launches) bd.append(el('div', { class: 'note', text: `${fmtInt(l.launches)} launches: mean host time ${fmtNs(l.avg_host_ns)}, mean launch-to-start ${fmtNs(l.avg_delay_ns)}, ${pct(l.short_share)} of kernels shorter than their launch.` }));
    } else bd.append(el('div', { class: 'note', text: 'No device work in this trace.' }));

    table($('top-kernels'), [
      { key: 'name', label: 'kernel', cls: 'name mono' }, { key: 'class', label: 'class' },
      { key: 'count', label: 'calls', num: true, fmt: fmtInt }, { key: 'total_ns', label: 'total', num: true, fmt: fmtNs }, { key: 'share', label: 'share', num: true, fmt: pct },
    ], (S.top_kernels || []).slice(0, 10), { filter: false });
    table($('top-ops'), [
      { key: 'name', label: 'op', cls: 'name mono', fmt: (v) => v == null ? '(no op)' : v },
      { key: 'device_events', label: 'kernels', num: true, fmt: fmtInt }, { key: 'device_ns', label: 'device time', num: true, fmt: fmtNs }, { key: 'share', label: 'share', num: true, fmt: pct },
    ], (S.ops || []).slice(0, 10), { filter: false });

    lookHereFirst(steps);
    criticalPath();
  }

  function lookHereFirst(steps) {
    const items = [];
    const gaps = (S.idle_gaps || []).slice(0, 3);
    for (const g of gaps) {
      items.push(el('li', {}, el('b', { text: `Device ${g.device} idle ${fmtNs(g.duration_ns)}` }), ` at ${fmtNs(g.start_ns)}; the host was in `,
        el('span', { class: 'mono', text: g.host && g.host.text ? g.host.text : '(no host activity)' }), ' ',
        el('a', { class: 'jump', text: 'show', onclick: () => { show('timeline'); whenTimeline((t) => t.zoomTo(g.start_ns - g.duration_ns * 0.2, g.end_ns + g.duration_ns * 0.2)); } })));
    }
    for (const m of S.memory || []) {
      items.push(el('li', {}, el('b', { text: `Memory peak ${fmtBytes(m.peak_bytes)}` }), ` on ${m.device_type_name} ${m.device_id} at ${fmtNs(m.peak_ns)}`,
        m.op ? el('span', {}, ' in ', el('span', { class: 'mono', text: m.op.name })) : ''));
    }
    const bound = {};
    steps.forEach((s) => (bound[s.bound_by] = (bound[s.bound_by] || 0) + 1));
    const worst = Object.entries(bound).sort((a, b) => b[1] - a[1])[0];
    if (worst && worst[0] !== 'device') items.push(el('li', {}, el('b', { text: `${worst[1]} of ${steps.length} steps bound by ${worst[0]}` }), worst[0] === 'host' ? (S.device_total_ns ? ': the device waited for the host (launch overhead, data loading, synchronisation).' : ': the trace has no device work, only host time.') : worst[0] === 'communication' ? ': collectives not hidden behind compute.' : ': neither the device nor the host ops were busy.'));
    const top = (S.top_kernels || [])[0];
    if (top) items.push(el('li', {}, el('b', { text: `Heaviest kernel: ${pct(top.share)} of device time` }), ' ', el('span', { class: 'mono', text: top.name })));
    if (!items.length) items.push(el('li', { text: 'Nothing stands out: no device idle gaps and no memory events.' }));
    $('look-here').replaceChildren(...items);
  }

  // From the summary's critical_path section (libopenreg_trace: the first ProfilerStep's critical path, HTA's
  // model): its length, what it went to, the heaviest ops and kernels on it. Without it, the slot says so.
  function criticalPath() {
    const slot = $('critical-path'), cp = S.critical_path;
    if (!cp) {
      slot.textContent = 'Not computed for this trace: the summary has no critical_path (it needs a ProfilerStep and device rows).';
      slot.dataset.state = 'empty';
      return;
    }
    slot.dataset.state = 'filled';
    slot.append(el('div', {}, el('b', { text: `${cp.step}: path ${fmtNs(cp.path_ns)}` }), ` of the step's ${fmtNs(cp.step_ns)} (${pct(cp.path_share)})`,
      ...(cp.lag_ns > 0 ? [el('div', { class: 'note', text: `The step is measured to the end of the work it launched: its host range is ${fmtNs(cp.host_step_ns)}, and the device is ${fmtNs(cp.lag_ns)} behind the host when it ends.` })] : [])));
    const kinds = Object.entries(cp.kinds || {}).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
    const total = kinds.reduce((a, [, v]) => a + v, 0) || 1;
    const KC = { host_op: COLORS.host, launch_overhead: '#a78bfa', kernel: COLORS.device, copy: '#22c55e', sync_wait: '#ef4444', communication: COLORS.communication, idle: COLORS.idle };
    slot.append(el('div', { class: 'bar' }, ...kinds.map(([k, v]) => el('div', { title: `${k} ${fmtNs(v)}`, style: `width:${(100 * v) / total}%;background:${KC[k] || '#64748b'}` }))),
      el('div', { class: 'legend' }, ...kinds.map(([k, v]) => el('span', {}, el('i', { style: 'background:' + (KC[k] || '#64748b') }), `${k.replace(/_/g, ' ')} ${fmtNs(v)}`))));
    const heaviest = [...(cp.top_ops || []), ...(cp.top_kernels || [])].sort((a, b) => b.path_ns - a.path_ns);
    const list = el('ol', { class: 'look', id: 'critical-path-items' });
    for (const r of heaviest.slice(0, 6))
      list.append(el('li', {}, el('span', { class: 'mono', text: r.name }), ` ${fmtNs(r.path_ns)} on the path (${r.kind.replace(/_/g, ' ')}` + (r.source ? `, ${r.source}` : '') + ')'));
    slot.append(list, el('div', { class: 'note', text: 'Every step, and across ranks: python -m torch_openreg critical-path TRACE|DIR' }));
  }

  function buildTables() {
    const kernels = R.kernel_table || [];
    $('kernel-count').textContent = `${fmtInt(kernels.length)} kernels, ${fmtInt(kernels.reduce((a, k) => a + k.count, 0))} calls`;
    $('kernel-count').dataset.kernels = String(kernels.length);
    table($('kernel-table'), [
      { key: 'name', label: 'kernel', cls: 'name mono', onclick: (r) => findInTimeline(r.name), hint: 'click: find it in the timeline' }, { key: 'class', label: 'class' },
      { key: 'count', label: 'calls', num: true, fmt: fmtInt }, { key: 'total_ns', label: 'device time', num: true, fmt: fmtNs },
      { key: 'avg_ns', label: 'mean', num: true, fmt: fmtNs }, { key: 'min_ns', label: 'min', num: true, fmt: fmtNs }, { key: 'max_ns', label: 'max', num: true, fmt: fmtNs },
      { key: 'op', label: 'launched by op', cls: 'mono', fmt: (v, r) => (v == null ? '(no op)' : v) + (r.ops > 1 ? ` (+${r.ops - 1})` : '') },
      { key: 'source', label: 'source line', cls: 'mono' },
    ], kernels, { id: 'kernels', sort: 'total_ns' });
    const ops = R.op_table || [];
    $('op-count').textContent = `${fmtInt(ops.length)} (op, input shapes) rows`;
    table($('op-table'), [
      { key: 'name', label: 'op', cls: 'name mono', onclick: (r) => findInTimeline(r.name), hint: 'click: find it in the timeline' }, { key: 'input_dims', label: 'input shapes', cls: 'mono clip' },
      { key: 'calls', label: 'calls', num: true, fmt: fmtInt }, { key: 'host_ns', label: 'host time', num: true, fmt: fmtNs },
      { key: 'self_host_ns', label: 'self host', num: true, fmt: fmtNs }, { key: 'device_ns', label: 'device time', num: true, fmt: fmtNs },
      { key: 'kernels', label: 'kernels', num: true, fmt: fmtInt },
    ], ops, { id: 'ops', sort: 'host_ns' });
    buildRoofline();
  }

  // ------------------------------------------------------------ roofline
  // From the summary's roofline (libopenreg_trace): per device and kernel name, FLOPs, bytes and the rates
  // they achieved against the peaks; the notes say what the trace lacks for the rest.
  function buildRoofline() {
    const rf = S.roofline || { ranges: 0, devices: [], notes: [] };
    const rows = rf.devices.flatMap((d) => d.kernels.map((k) => ({ ...k, device: d.device, kernel: k.name + (k.device_total ? ` (${fmtInt(k.kernels)} kernels)` : '') })));
    $('roofline-count').textContent = rf.ranges ? `${fmtInt(rf.ranges)} metric ranges, ${fmtInt(rows.length)} rows` : '';
    const many = rf.devices.length > 1;
    const notes = [...rf.notes, ...rf.devices.flatMap((d) => d.notes.map((n) => (many ? `device ${d.device}: ` : '') + n))];
    $('roofline-notes').replaceChildren(...notes.map((n) => el('li', { text: n })));
    state.roofline = { mode: rooflineChart(rf, rows), notes };
    if (!rows.length) return;
    table($('roofline'), [
      { key: 'kernel', label: 'kernel', cls: 'name mono' }, { key: 'device', label: 'device', num: true },
      { key: 'count', label: 'ranges', num: true, fmt: fmtInt }, { key: 'time_ns', label: 'time', num: true, fmt: fmtNs },
      { key: 'flops', label: 'FLOPs', num: true, fmt: (v) => fmtSi(v, 'FLOP') }, { key: 'bytes', label: 'bytes', num: true, fmt: (v) => fmtSi(v, 'B') },
      { key: 'intensity_flops_per_byte', label: 'FLOP/B', num: true, fmt: (v) => (v == null ? '–' : v.toPrecision(3)) },
      { key: 'flops_per_s', label: 'FLOP/s', num: true, fmt: (v) => fmtSi(v, 'FLOP/s') }, { key: 'peak_flops_share', label: 'of peak', num: true, fmt: share },
      { key: 'bytes_per_s', label: 'bytes/s', num: true, fmt: (v) => fmtSi(v, 'B/s') }, { key: 'peak_bytes_share', label: 'of peak', num: true, fmt: share },
      { key: 'bound', label: 'bound', fmt: (v) => v || '–' },
    ], rows, { id: 'roofline-table', sort: rows.some((r) => r.time_ns != null) ? 'time_ns' : 'flops' });
  }

  // The log-log roofline: kernels at (intensity, achieved FLOP/s) under min(peak FLOP/s, intensity x peak
  // bytes/s). Without intensities, FLOPs per kernel; without FLOPs, nothing. Returns which it drew.
  function rooflineChart(rf, rows) {
    const canvas = $('roofline-chart'), box = canvas.parentElement;
    const points = rows.filter((r) => r.intensity_flops_per_byte > 0 && r.flops_per_s > 0);
    const withFlops = rows.filter((r) => r.flops > 0).sort((a, b) => b.flops - a.flops).slice(0, 20);
    if (!window.Chart || (!points.length && !withFlops.length)) { box.remove(); return 'none'; }
    if (!points.length) {
      box.style.height = Math.max(160, 40 + 20 * withFlops.length) + 'px';
      new Chart(canvas, { type: 'bar', data: { labels: withFlops.map((r) => r.kernel.length > 70 ? r.kernel.slice(0, 69) + '…' : r.kernel),
        datasets: [{ label: 'FLOPs (no intensity or achieved FLOP/s to place them on a roofline: see the notes)', data: withFlops.map((r) => r.flops), backgroundColor: COLORS.device }] },
        options: { indexAxis: 'y', scales: { x: { title: { display: true, text: 'FLOPs' }, ticks: { callback: (v) => fmtSi(v, '') } }, y: { ticks: { autoSkip: false } } } } });
      return 'flops';
    }
    const xs = points.map((r) => r.intensity_flops_per_byte);
    const ridges = rf.devices.map((d) => d.ridge_flops_per_byte).filter((v) => v > 0);
    const lo = Math.min(...xs, ...ridges) / 4, hi = Math.max(...xs, ...ridges) * 4;
    const BOUND = { memory: COLORS.communication, compute: COLORS.device };
    const datasets = rf.devices.map((d, i) => ({ label: `kernels on device ${d.device} (blue: compute-bound, orange: memory-bound, grey: no ridge)`, type: 'scatter', pointRadius: 5, pointStyle: ['circle', 'triangle', 'rect', 'star'][i % 4],
      data: points.filter((r) => r.device === d.device).map((r) => ({ x: r.intensity_flops_per_byte, y: r.flops_per_s, row: r })),
      backgroundColor: (c) => (c.raw && BOUND[c.raw.row.bound]) || '#94a3b8' }));
    for (const d of rf.devices) {
      const roof = (x) => Math.min(d.peak_flops_per_s == null ? Infinity : d.peak_flops_per_s, d.peak_bytes_per_s == null ? Infinity : x * d.peak_bytes_per_s);
      if (!isFinite(roof(lo))) continue;
      const at = [lo, ...(d.ridge_flops_per_byte ? [d.ridge_flops_per_byte] : []), hi];
      datasets.push({ label: `roofline of device ${d.device}` + (d.ridge_flops_per_byte ? ` (ridge ${d.ridge_flops_per_byte.toPrecision(3)} FLOP/B)` : ''),
        type: 'line', data: at.map((x) => ({ x, y: roof(x) })), borderColor: '#dc2626', borderWidth: 1.5, pointRadius: 0 });
    }
    const decade = (unit) => (v) => { const l = Math.log10(v); return Math.abs(l - Math.round(l)) < 1e-9 ? fmtSi(v, unit) : ''; };
    new Chart(canvas, { type: 'scatter', data: { datasets }, options: { parsing: false,
      scales: { x: { type: 'logarithmic', min: lo, max: hi, title: { display: true, text: 'arithmetic intensity (FLOP/byte)' }, ticks: { callback: decade('') } },
        y: { type: 'logarithmic', title: { display: true, text: 'achieved FLOP/s (over the kernels\' time)' }, ticks: { callback: decade('FLOP/s') } } },
      plugins: { tooltip: { callbacks: { label: (c) => c.raw.row ? `${c.raw.row.kernel}: ${c.raw.x.toPrecision(3)} FLOP/B, ${fmtSi(c.raw.y, 'FLOP/s')}` + (c.raw.row.bound ? `, ${c.raw.row.bound}-bound` : '') : `${fmtSi(c.raw.y, 'FLOP/s')} attainable at ${c.raw.x.toPrecision(3)} FLOP/B` } } } } });
    return 'roofline';
  }

  // ------------------------------------------------------------ timeline
  function b64(s) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(s);
    const bin = atob(s), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }
  // One packed array: base64, zlib-compressed by the library ("encoding": "deflate"), inflated by the
  // browser's own DecompressionStream (no library, no request).
  async function unpack(T, key, Type) {
    let bytes = b64(T[key]);
    if (T.encoding === 'deflate') {
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
      bytes = new Uint8Array(await new Response(stream).arrayBuffer());
    }
    return new Type(bytes.buffer, bytes.byteOffset, bytes.byteLength / Type.BYTES_PER_ELEMENT);
  }
  async function unpackEvents(T) {
    const kinds = { ts: Float64Array, dur: Float32Array, name: Uint32Array, cat: Uint8Array, arg: Uint32Array, partner: Int32Array, op: Int32Array };
    const keys = Object.keys(kinds), arrays = await Promise.all(keys.map((k) => unpack(T, k, kinds[k])));
    const ev = {};
    keys.forEach((k, i) => (ev[k] = arrays[i]));
    if (T.ts_delta) {  // starts were written as differences within each row
      const ts = ev.ts;
      for (const lane of T.lanes) for (const r of lane.rows) for (let k = r.first + 1, e = r.first + r.count; k < e; k++) ts[k] += ts[k - 1];
    }
    return ev;
  }
  const TL_LABEL_W = 230;  // the timeline's label column; the counter charts' y axes as wide, so the plots align
  const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#86bcb6', '#8cd17d', '#d4a6c8'];
  let timeline = null;

  function Timeline(canvas, T, ev) {
    const n = T.events;
    const LABEL_W = TL_LABEL_W, AXIS_H = 22, ROW_H = 16, LANE_GAP = 6;
    const nameColor = T.names.map((s, i) => { let h = 0; const t = s || ''; for (let j = 0; j < t.length; j++) h = (h * 31 + t.charCodeAt(j)) | 0; return PALETTE[Math.abs(h) % PALETTE.length]; });
    // Layout: lanes one under another; each depth row ROW_H tall.
    let y = 0; const rows = [];
    const lanes = T.lanes.map((l) => {
      const lane = { ...l, y, h: 0 };
      let maxDepth = -1;
      for (const r of l.rows) { maxDepth = Math.max(maxDepth, r.depth); rows.push({ ...r, lane, y: y + 16 + r.depth * ROW_H }); }
      lane.h = Math.max(34, 16 + (maxDepth + 1) * ROW_H) + LANE_GAP; y += lane.h;
      return lane;
    });
    rows.sort((a, b) => a.first - b.first);
    const rowFirst = Int32Array.from(rows.map((r) => r.first));
    const totalH = y;
    const view = { t0: 0, t1: Math.max(1, T.end_ns), scrollY: 0 };
    const self = { view, ev, frameTimes: [], selected: -1, matches: null, matchAt: -1, n };
    let W = 0, H = 0, dpr = 1, ctx = canvas.getContext('2d', { alpha: false }), pending = false;

    function lowerBound(arr, lo, hi, v) { while (lo < hi) { const m = (lo + hi) >>> 1; if (arr[m] < v) lo = m + 1; else hi = m; } return lo; }
    function rowOf(k) { let lo = 0, hi = rowFirst.length - 1; while (lo < hi) { const m = (lo + hi + 1) >>> 1; if (rowFirst[m] <= k) lo = m; else hi = m - 1; } return rows[lo]; }
    function resize() {
      dpr = window.devicePixelRatio || 1;
      const r = canvas.getBoundingClientRect(); W = Math.max(100, r.width); H = Math.max(100, r.height);
      canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
      request();
    }
    function request() { if (!pending) { pending = true; requestAnimationFrame(frame); } }
    function frame() { pending = false; const t = performance.now(); draw(); self.frameTimes.push(performance.now() - t); if (self.frameTimes.length > 1000) self.frameTimes.shift(); if (self.onView) self.onView(view.t0, view.t1); }
    const xOf = (t) => LABEL_W + (t - view.t0) * (W - LABEL_W) / (view.t1 - view.t0);
    const tOf = (x) => view.t0 + (x - LABEL_W) * (view.t1 - view.t0) / (W - LABEL_W);

    function drawRow(r, yTop) {
      const { ts, dur, name } = ev;
      const scale = (W - LABEL_W) / (view.t1 - view.t0), t0 = view.t0, t1 = view.t1;
      const end = r.first + r.count;
      let k = lowerBound(ts, r.first, end, t0 - r.max_dur);
      let runX0 = -1, runX1 = -1;
      const h = ROW_H - 2;
      const flush = () => { if (runX1 > runX0) { ctx.fillStyle = '#94a3b8'; ctx.fillRect(runX0, yTop, runX1 - runX0, h); } runX0 = runX1 = -1; };
      while (k < end) {
        const s = ts[k];
        if (s > t1) break;
        const x0 = LABEL_W + (s - t0) * scale, w = dur[k] * scale, x1 = x0 + w;
        if (x1 < LABEL_W) { k++; continue; }
        if (w < 2) {
          if (runX1 >= 0 && x0 <= runX1 + 1) runX1 = Math.max(runX1, x1, x0 + 1);
          else { flush(); runX0 = Math.max(LABEL_W, x0); runX1 = Math.max(x1, x0 + 1); }
          // Everything starting inside the same pixel merges: jump past it.
          const nextT = t0 + (Math.floor(runX1 - LABEL_W) + 1) / scale;
          if (k + 1 < end && ts[k + 1] < nextT) {
            let j = lowerBound(ts, k + 1, end, nextT);
            if (j - 1 > k && ts[j - 1] + dur[j - 1] > nextT) j = j - 1;  // a long one started inside: draw it
            else if (j - 1 > k) runX1 = Math.max(runX1, LABEL_W + (ts[j - 1] + dur[j - 1] - t0) * scale);
            k = j;
          } else k++;
          continue;
        }
        flush();
        const cx0 = Math.max(LABEL_W, x0), cw = Math.min(x1, W) - cx0;
        ctx.fillStyle = nameColor[name[k]];
        ctx.fillRect(cx0, yTop, Math.max(1, cw - (w > 4 ? 1 : 0)), h);
        if (cw > 40) {
          const label = T.names[name[k]] || '', fit = Math.floor((cw - 6) / 6.2);
          if (fit > 2) { ctx.fillStyle = '#fff'; ctx.fillText(label.length > fit ? label.slice(0, fit - 1) + '…' : label, cx0 + 3, yTop + h - 4); }
        }
        k++;
      }
      flush();
    }

    function draw() {
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, H);
      ctx.font = '11px system-ui, "DejaVu Sans", sans-serif';
      const top = AXIS_H - view.scrollY;
      for (const r of rows) {
        const yy = top + r.y;
        if (yy + ROW_H < AXIS_H || yy > H) continue;
        drawRow(r, yy);
      }
      // Search matches (outlined, up to 20,000), then the selection.
      if (self.matches && self.matches.length <= 20000) {
        ctx.strokeStyle = '#f59e0b'; ctx.lineWidth = 2;
        const m = self.matches;
        for (let i = 0; i < m.length; i++) {  // sorted by start
          const k = m[i], s0 = ev.ts[k];
          if (s0 > view.t1) break;
          if (s0 + ev.dur[k] < view.t0) continue;
          const yy = top + rowOf(k).y;
          if (yy + ROW_H < AXIS_H || yy > H) continue;
          const x0 = Math.max(LABEL_W, xOf(s0));
          ctx.strokeRect(x0, yy, Math.max(2, xOf(s0 + ev.dur[k]) - x0), ROW_H - 2);
        }
      }
      if (self.selected >= 0) {
        const k = self.selected, r = rowOf(k), yy = top + r.y;
        const x0 = xOf(ev.ts[k]), x1 = Math.max(x0 + 2, xOf(ev.ts[k] + ev.dur[k]));
        ctx.strokeStyle = '#111'; ctx.lineWidth = 2; ctx.strokeRect(x0, yy - 1, x1 - x0, ROW_H);
        const p = ev.partner[k];
        if (p >= 0) arrow(p, k);
      }
      // Lane labels and separators.
      ctx.fillStyle = '#f4f5f7'; ctx.fillRect(0, AXIS_H, LABEL_W, H);
      for (const l of lanes) {
        const yy = top + l.y;
        if (yy + l.h < AXIS_H || yy > H) continue;
        const cut = (s) => (s.length > 37 ? s.slice(0, 36) + '…' : s), at = l.label.lastIndexOf(' · ');
        const ly = Math.max(AXIS_H + 12, Math.min(yy + 12, yy + l.h - 24));
        ctx.fillStyle = l.kind === 'device' ? '#1e40af' : '#334155';
        ctx.fillText(cut((l.kind === 'device' ? '▣ ' : '▤ ') + l.label.slice(at + 3)), 6, ly);
        ctx.fillStyle = '#64748b';
        ctx.fillText(cut('   ' + l.label.slice(0, at)), 6, ly + 13);
        ctx.fillStyle = '#e5e7eb'; ctx.fillRect(0, yy + l.h - 2, W, 1);
      }
      axis();
    }
    function arrow(a, b) {  // from the launch a to the kernel b (whichever is host)
      const hostFirst = rowOf(a).lane.kind !== 'device';
      const from = hostFirst ? a : b, to = hostFirst ? b : a, top = AXIS_H - view.scrollY;
      // From the launch's visible part (its start when shown) to the kernel's start.
      const x0 = Math.min(Math.max(xOf(ev.ts[from]), LABEL_W + 1), xOf(ev.ts[from] + ev.dur[from]));
      const y0 = top + rowOf(from).y + ROW_H / 2, x1 = xOf(ev.ts[to]), y1 = top + rowOf(to).y + ROW_H / 2;
      ctx.strokeStyle = '#dc2626'; ctx.fillStyle = '#dc2626'; ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y1); ctx.stroke();
      const ang = Math.atan2(y1 - y0, x1 - x0);
      ctx.beginPath(); ctx.moveTo(x1, y1); ctx.lineTo(x1 - 9 * Math.cos(ang - 0.4), y1 - 9 * Math.sin(ang - 0.4)); ctx.lineTo(x1 - 9 * Math.cos(ang + 0.4), y1 - 9 * Math.sin(ang + 0.4)); ctx.fill();
    }
    function axis() {
      ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, AXIS_H); ctx.fillStyle = '#e5e7eb'; ctx.fillRect(0, AXIS_H - 1, W, 1);
      const span = view.t1 - view.t0, target = span / ((W - LABEL_W) / 110);
      const p = Math.pow(10, Math.floor(Math.log10(target))); const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= target);
      // The first tick absolute, to the step's precision; the others as offsets from it.
      ctx.fillStyle = '#475569';
      const unit = step >= 1e9 ? [1e9, 's'] : step >= 1e6 ? [1e6, 'ms'] : step >= 1e3 ? [1e3, 'µs'] : [1, 'ns'];
      const first = Math.ceil(view.t0 / step) * step;
      for (let t = first; t <= view.t1; t += step) {
        const x = xOf(t);
        ctx.fillRect(x, AXIS_H - 6, 1, 6);
        ctx.fillText(t === first ? (Math.abs(t / unit[0]) < 5e-4 ? 0 : t / unit[0]).toLocaleString('en-US', { maximumFractionDigits: 3 }) + ' ' + unit[1] : '+' + fmtNs(t - first), x + 3, 13);
      }
      ctx.fillText('span ' + fmtNs(span), 6, 13);
    }

    function clampView() {
      const span = Math.max(1000, Math.min(view.t1 - view.t0, T.end_ns * 1.2 + 1000));
      let t0 = Math.max(-0.1 * T.end_ns, Math.min(view.t0, T.end_ns * 1.1 - span));
      view.t0 = t0; view.t1 = t0 + span;
      view.scrollY = Math.max(0, Math.min(view.scrollY, Math.max(0, totalH - (H - AXIS_H) + 20)));
    }
    function zoom(factor, atX) {
      const t = tOf(atX == null ? LABEL_W + (W - LABEL_W) / 2 : atX);
      view.t0 = t - (t - view.t0) * factor; view.t1 = t + (view.t1 - t) * factor; clampView(); request();
    }
    function pan(dx) { const dt = dx * (view.t1 - view.t0) / (W - LABEL_W); view.t0 += dt; view.t1 += dt; clampView(); request(); }
    function hit(x, yPix) {
      const yy = yPix - AXIS_H + view.scrollY;
      const r = rows.find((r) => yy >= r.y && yy < r.y + ROW_H);
      if (!r || x < LABEL_W) return -1;
      const t = tOf(x), tol = 3 * (view.t1 - view.t0) / (W - LABEL_W), end = r.first + r.count;
      let k = lowerBound(ev.ts, r.first, end, t + tol) - 1, best = -1, bestD = Infinity;
      for (let j = k; j >= r.first && ev.ts[j] >= t - r.max_dur - tol; j--) {
        const d = t < ev.ts[j] ? ev.ts[j] - t : t > ev.ts[j] + ev.dur[j] ? t - ev.ts[j] - ev.dur[j] : 0;
        if (d < bestD) { bestD = d; best = j; }
        if (d === 0) break;
      }
      return bestD <= tol ? best : -1;
    }
    function select(k, reveal) {
      self.selected = k; details(k);
      if (reveal) revealEvent(k);
      request();
    }
    function revealEvent(k) {  // brings event k into view
      if (k >= 0) {
        const s = ev.ts[k], d = Math.max(ev.dur[k], 1000), span = view.t1 - view.t0;
        if (d * 20 < span || s < view.t0 || s + d > view.t1) { view.t0 = s - d * 2; view.t1 = s + d * 3; }  // all of it, not tiny
        const r = rowOf(k); if (r.y < view.scrollY || r.y > view.scrollY + H - AXIS_H - 40) view.scrollY = r.y - 60;
        clampView();
      }
      request();
    }
    function details(k) {
      const box = $('tl-details');
      if (k < 0) { box.replaceChildren(el('span', { class: 'note', text: 'Select an event to see its args and its launch or kernel.' })); return; }
      const r = rowOf(k), dl = el('dl');
      const add = (dt, dd) => dl.append(el('dt', { text: dt }), el('dd', {}, dd));
      add('name', el('span', { class: 'mono', id: 'sel-name', text: T.names[ev.name[k]] }));
      add('category', T.cats[ev.cat[k]] || '');
      add('row', r.lane.label + (r.depth ? ` (depth ${r.depth})` : ''));
      add('start', `${(ev.ts[k] / 1e3).toLocaleString('en-US', { maximumFractionDigits: 3 })} µs after the first event (${fmtNs(ev.ts[k])})`);
      add('duration', fmtNs(ev.dur[k]));
      const p = ev.partner[k];
      if (p >= 0) add(rowOf(k).lane.kind === 'device' ? 'launched by' : 'launches', el('a', { class: 'jump', id: 'sel-partner', text: T.names[ev.name[p]], onclick: () => select(p, true) }));
      const o = ev.op[k];
      if (o >= 0) add('op', el('a', { class: 'jump', id: 'sel-op', text: T.names[ev.name[o]], onclick: () => select(o, true) }));
      const a = T.args[ev.arg[k]];
      if (a) { let pretty = a; try { pretty = JSON.stringify(JSON.parse(a), null, 1); } catch (e) { /* keep the text */ } add('args', el('pre', { class: 'mono', text: pretty })); }
      box.replaceChildren(dl);
    }
    function search(text, exact) {  // by substring, any case; exact: the whole name
      text = exact ? text : text.trim().toLowerCase();
      if (!text) { self.matches = null; $('tl-matches').textContent = ''; request(); return; }
      const want = new Uint8Array(T.names.length); let any = false;
      T.names.forEach((s, i) => { if (s && (exact ? s === text : s.toLowerCase().includes(text))) { want[i] = 1; any = true; } });
      const out = [];
      if (any) for (let k = 0; k < n; k++) if (want[ev.name[k]]) out.push(k);
      out.sort((a, b) => ev.ts[a] - ev.ts[b]);
      self.matches = out; self.matchAt = -1; request();
      $('tl-matches').textContent = `${fmtInt(out.length)} match${out.length === 1 ? '' : 'es'}`;
    }
    function nextMatch() {
      if (!self.matches || !self.matches.length) return;
      self.matchAt = (self.matchAt + 1) % self.matches.length;
      select(self.matches[self.matchAt], true);
      $('tl-matches').textContent = `${self.matchAt + 1} of ${fmtInt(self.matches.length)}`;
    }

    // Input: wheel zooms at the cursor (shift: pans), drag pans, click selects, keys.
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      if (e.offsetX < LABEL_W) { view.scrollY += e.deltaY; clampView(); request(); return; }
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan(e.shiftKey ? e.deltaY : e.deltaX);
      else zoom(Math.exp(e.deltaY * 0.002), e.offsetX);
    }, { passive: false });
    let drag = null;
    canvas.addEventListener('mousedown', (e) => { canvas.focus(); drag = { x: e.clientX, y: e.clientY, moved: false, t0: view.t0, t1: view.t1, sy: view.scrollY }; });
    window.addEventListener('mousemove', (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (!drag.moved) return;
      const dt = dx * (drag.t1 - drag.t0) / (W - LABEL_W);
      view.t0 = drag.t0 - dt; view.t1 = drag.t1 - dt; view.scrollY = drag.sy - dy; clampView(); request();
    });
    window.addEventListener('mouseup', (e) => {
      if (!drag) return;
      const wasClick = !drag.moved; drag = null;
      if (wasClick) { const r = canvas.getBoundingClientRect(); select(hit(e.clientX - r.left, e.clientY - r.top), false); }
    });
    // Keys act whenever the timeline is shown, unless a text box has them.
    window.addEventListener('keydown', (e) => {
      if (state.view !== 'timeline' || e.ctrlKey || e.metaKey || e.altKey) return;
      const tag = e.target && e.target.tagName;
      if (tag === 'INPUT' || tag === 'TEXTAREA') { if (e.key === 'Escape') e.target.blur(); return; }
      const k = e.key.toLowerCase(), step = (W - LABEL_W) * 0.15;
      if (k === 'w' || k === '=' || k === '+') zoom(0.7);
      else if (k === 's' || k === '-') zoom(1 / 0.7);
      else if (k === 'a' || k === 'arrowleft') pan(-step);
      else if (k === 'd' || k === 'arrowright') pan(step);
      else if (k === 'arrowup') { view.scrollY -= 40; clampView(); request(); }
      else if (k === 'arrowdown') { view.scrollY += 40; clampView(); request(); }
      else if (k === '0' || k === 'home') reset();
      else if (k === 'escape') select(-1);
      else if (k === '/') { $('tl-search').focus(); }
      else return;
      e.preventDefault();
    });
    function reset() { view.t0 = 0; view.t1 = Math.max(1, T.end_ns); view.scrollY = 0; clampView(); request(); }
    $('tl-reset').addEventListener('click', reset);
    const box = $('tl-search');
    box.addEventListener('keydown', (e) => { if (e.key === 'Enter') { if (!self.matches) search(box.value); nextMatch(); e.preventDefault(); } });
    box.addEventListener('input', () => search(box.value));
    window.addEventListener('resize', () => { if (state.view === 'timeline') resize(); });
    Object.assign(self, { resize, request, select, reveal: revealEvent, zoom, pan, reset, search, nextMatch, rowOf, xOf, tOf, lanes, LABEL_W, AXIS_H, ROW_H,
      zoomTo: (a, b) => { view.t0 = a; view.t1 = Math.max(a + 1000, b); clampView(); request(); },
      eventY: (k) => AXIS_H - view.scrollY + rowOf(k).y + ROW_H / 2 });
    return self;
  }

  function buildTimeline() {
    if (!R.timeline) {  // the packed events follow this script in their own tag, parsed once the document is
      const tag = document.getElementById('timeline-data-' + MAIN);
      R.timeline = tag && tag.textContent ? JSON.parse(tag.textContent) : null;
    }
    const T = R.timeline;
    buildCounters(T && T.events ? T.end_ns : Math.max(1, ...(R.counters || []).map((c) => c.t_ns[c.t_ns.length - 1] || 0)));
    if (!T || !T.events) { $('tl-canvas').parentElement.replaceWith(el('div', { class: 'panel note', text: 'No events to draw.' })); return; }
    state.names = T.names;
    unpackEvents(T).then((ev) => {
      timeline = window.__timeline = Timeline($('tl-canvas'), T, ev);
      timeline.onView = syncCounters;
      timeline.resize();
      timeline.ready = true;
      for (const fn of whenTimeline.queue.splice(0)) fn(timeline);
    }).catch((e) => { state.errors.push(String(e && e.stack || e)); $('tl-details').textContent = 'The timeline could not be read: ' + e; });
  }
  // ------------------------------------------------------------ counter tracks
  // Under the timeline: a step chart per counter track (a value holds until its series' next sample), its
  // plot aligned with the timeline's and following its zoom and pan.
  const counterCharts = [];
  // The unit of a track's axis, and its whole range: zoomed in, the value holding from before the view
  // must stay on the chart (Chart.js would fit the axis to the samples in view only).
  function counterScale(c) {
    const values = c.values.flat().filter((v) => v != null);
    const min = Math.min(0, ...values), max = Math.max(0, ...values);
    const unit = c.series.every((s) => /bytes/.test(s) && /per_s$/.test(s)) ? { bytes: 1e9, name: 'GB/s' }
      : c.series.every((s) => /bytes/.test(s)) ? byteUnit(max) : { bytes: 1, name: c.series.length === 1 ? c.series[0] : '' };
    return { div: unit.bytes, unit: unit.name, min: min / unit.bytes, max: max / unit.bytes };
  }
  function buildCounters(endNs) {
    const box = $('counter-tracks'), tracks = R.counters || [];
    if (!tracks.length) { box.append(el('div', { class: 'note', id: 'counters-note', text: S.counters && S.counters.note ? S.counters.note : 'No counter tracks.' })); return; }
    tracks.forEach((c, i) => {
      const canvas = el('canvas', { id: 'counter-chart-' + i });
      box.append(el('div', { class: 'track', 'data-track': `${c.device}/${c.name}` }, canvas));
      if (!window.Chart) return;
      const scale = counterScale(c);
      const datasets = c.series.map((name, j) => ({ label: name, stepped: true, spanGaps: true, borderWidth: 1.5, pointRadius: c.t_ns.length > 60 ? 0 : 2,
        borderColor: PALETTE[j % PALETTE.length], backgroundColor: PALETTE[j % PALETTE.length],
        data: c.t_ns.map((t, k) => ({ x: t / 1e6, y: c.values[j][k] == null ? null : c.values[j][k] / scale.div })) }));
      const title = `dev ${c.device} · ${c.name}` + (c.category ? ` [${c.category}]` : '') + ` · ${fmtInt(c.samples)} samples` + (c.samples > c.t_ns.length ? ` (${fmtInt(c.t_ns.length)} drawn, peaks kept)` : '');
      counterCharts.push(new Chart(canvas, { type: 'line', data: { datasets }, options: { parsing: false, normalized: true,
        plugins: { title: { display: true, text: title, align: 'start', padding: 2 }, legend: { align: 'end', labels: { boxWidth: 10 } } },
        scales: { x: { type: 'linear', min: 0, max: endNs / 1e6, ticks: { align: 'inner', maxRotation: 0, callback: (v) => fmtNs(v * 1e6) } },
          y: { suggestedMin: scale.min, suggestedMax: scale.max, title: { display: !!scale.unit, text: scale.unit }, afterFit: (axis) => { axis.width = TL_LABEL_W; } } } } }));
    });
  }
  function syncCounters(t0, t1) {
    const lo = t0 / 1e6, hi = t1 / 1e6;
    for (const c of counterCharts) {
      if (c.options.scales.x.min === lo && c.options.scales.x.max === hi) continue;
      c.options.scales.x.min = lo; c.options.scales.x.max = hi; c.update('none');
    }
  }
  state.counterCharts = counterCharts;

  // A table's name, found in the timeline: its first occurrence selected, Enter walks through the rest.
  function findInTimeline(name) {
    show('timeline');
    whenTimeline((t) => { $('tl-search').value = name; t.search(name, true); t.nextMatch(); });
  }
  // Runs fn once the timeline is built (its events are inflated asynchronously).
  function whenTimeline(fn) { if (timeline) fn(timeline); else whenTimeline.queue.push(fn); }
  whenTimeline.queue = [];

  // ------------------------------------------------------------ memory
  function buildMemory() {
    const box = $('memory-devices');
    // Device memory first; the host's (device type 0, CPU) after it, for reference.
    const curves = (R.memory || []).slice().sort((a, b) => (a.device_type === 0) - (b.device_type === 0));
    if (!curves.length) box.append(el('div', { class: 'panel note', text: 'No [memory] events in this trace (record it with profile_memory=True).' }));
    curves.forEach((m, i) => {
      const canvas = el('canvas', { id: 'memory-chart-' + i });
      const panel = el('div', { class: 'panel' }, el('h2', { text: `${m.device_type === 0 ? 'Host memory (CPU)' : m.device_type_name + ' ' + m.device_id}: peak `, }, el('span', { id: 'memory-peak-' + i, 'data-bytes': String(m.peak_bytes), text: fmtBytes(m.peak_bytes) })),
        el('div', { class: 'note', text: `at ${fmtNs(m.peak_ns)}` + (m.peak_op ? `, in ${m.peak_op}` : '') + ` · ${fmtInt(m.events)} memory events` }),
        el('div', { class: 'chart' }, canvas));
      box.append(panel);
      const unit = byteUnit(Math.max(m.peak_bytes, ...(m.reserved || [0])));
      const toPts = (ys) => m.t_ns.map((t, j) => ({ x: t / 1e6, y: ys[j] / unit.bytes }));
      const ds = [{ label: `allocated (${unit.name})`, data: toPts(m.allocated), borderColor: COLORS.device, backgroundColor: 'rgba(59,130,246,.15)', fill: true, pointRadius: 0, stepped: true, borderWidth: 1.5 }];
      if (m.reserved) ds.push({ label: `reserved (${unit.name})`, data: toPts(m.reserved), borderColor: '#64748b', pointRadius: 0, stepped: true, borderWidth: 1, borderDash: [4, 3] });
      ds.push({ label: 'peak', data: [{ x: m.peak_ns / 1e6, y: m.peak_bytes / unit.bytes }], borderColor: '#dc2626', backgroundColor: '#dc2626', pointRadius: 5, showLine: false });
      if (window.Chart) new Chart(canvas, { type: 'line', data: { datasets: ds }, options: { parsing: false, normalized: true, scales: { x: { type: 'linear', title: { display: true, text: 'ms' } }, y: { title: { display: true, text: unit.name }, beginAtZero: true } } } });
      const live = el('div'), shown = (m.live_at_peak || []).length, n = m.live_allocations;
      const heading = `Live at the peak: ${fmtInt(n)} allocation${n === 1 ? '' : 's'}` + (shown < n ? `, the largest ${fmtInt(shown)}:` : ':');
      panel.append(el('h3', { text: m.live_known ? heading : 'The trace\'s memory events carry no addresses: what was live at the peak is unknown.' }), live);
      if (m.live_known) table(live, [{ key: 'bytes', label: 'bytes', num: true, fmt: fmtBytes }, { key: 'op', label: 'allocated in op', cls: 'mono', fmt: (v) => v == null ? '(no op)' : v }, { key: 't_ns', label: 'at', num: true, fmt: fmtNs }], m.live_at_peak, { filter: false });
    });
    const snap = DATA.snapshot, sbox = $('snapshot');
    if (!snap) { sbox.append(el('h2', { text: 'Memory snapshot' }), el('div', { class: 'note', text: 'No snapshot given (report --memory SNAPSHOT adds the largest live allocations at the peak by Python frame).' })); return; }
    sbox.append(el('h2', { text: 'Memory snapshot: ' + DATA.meta.snapshot }));
    for (const d of snap) {
      sbox.append(el('h3', { text: `device ${d.device}: peak ${fmtBytes(d.peak.bytes)} in use (reserved ${fmtBytes(d.peak.reserved)}); now ${fmtBytes(d.allocated)} allocated, ${fmtBytes(d.reserved)} reserved` }));
      const t = el('div'); sbox.append(t);
      table(t, [{ key: 'site', label: 'allocated at (Python frame)', cls: 'mono name' }, { key: 'bytes', label: 'bytes live at the peak', num: true, fmt: fmtBytes }, { key: 'blocks', label: 'blocks', num: true, fmt: fmtInt }], d.live_at_peak, { filter: false, id: 'snapshot-sites-' + d.device });
    }
  }

  // ------------------------------------------------------------ ranks
  function buildRanks() {
    const box = $('ranks'), rk = DATA.ranks;
    const rows = DATA.traces.map((t, i) => {
      const s = t.summary, c = s.communication || {}, st = t.report.steps || [];
      const info = rk && rk.ranks ? rk.ranks.find((r) => r.path.split(', ').includes(DATA.meta.traces[i].path)) : null;
      return { file: DATA.meta.traces[i].path.split('/').pop(), rank: c.rank != null ? c.rank : null, steps: st.length,
        step_ns: st.length ? st.reduce((a, x) => a + x.duration_ns, 0) / st.length : null,
        device_ns: s.device_total_ns, comm_ns: c.comm_ns, overlap_share: c.overlap_share, exposed_ns: c.exposed_ns,
        waited_ns: info ? info.waited_ns : null, last_arrivals: info ? info.last_arrivals : null };
    });
    const p = el('div', { class: 'panel' }, el('h2', { text: `Per rank (${rows.length} trace${rows.length > 1 ? 's' : ''})` }));
    box.append(p);
    const canvas = el('canvas', { id: 'ranks-chart' });
    p.append(el('div', { class: 'chart small' }, canvas));
    // A trace without distributedInfo is no rank (one process's profiling cycles): named by its file only.
    if (window.Chart) new Chart(canvas, { type: 'bar', data: { labels: rows.map((r) => (r.rank != null ? `rank ${r.rank} · ` : '') + r.file), datasets: [
      { label: 'mean step (ms)', data: rows.map((r) => (r.step_ns || 0) / 1e6), backgroundColor: '#94a3b8' },
      { label: 'communication (ms)', data: rows.map((r) => (r.comm_ns || 0) / 1e6), backgroundColor: COLORS.communication },
      { label: 'exposed communication (ms)', data: rows.map((r) => (r.exposed_ns || 0) / 1e6), backgroundColor: '#dc2626' },
      { label: 'waited for the last rank (ms)', data: rows.map((r) => (r.waited_ns || 0) / 1e6), backgroundColor: COLORS.host }] } });
    const t = el('div'); p.append(t);
    table(t, [{ key: 'rank', label: 'rank', num: true }, { key: 'file', label: 'trace', cls: 'mono' }, { key: 'steps', label: 'steps', num: true },
      { key: 'step_ns', label: 'mean step', num: true, fmt: fmtNs }, { key: 'device_ns', label: 'device time', num: true, fmt: fmtNs },
      { key: 'comm_ns', label: 'communication', num: true, fmt: fmtNs }, { key: 'overlap_share', label: 'overlapped', num: true, fmt: pct },
      { key: 'exposed_ns', label: 'exposed', num: true, fmt: fmtNs }, { key: 'waited_ns', label: 'waited at collectives', num: true, fmt: fmtNs },
      { key: 'last_arrivals', label: 'arrived last', num: true, fmt: fmtInt }], rows, { filter: false, id: 'rank-table' });
    if (!rk) { box.append(el('div', { class: 'panel note', text: rows.length > 1 ? 'No collectives matched across these traces.' : 'One trace: give a folder of rank traces to compare ranks.' })); return; }
    const c = el('div', { class: 'panel' }, el('h2', { text: `Collectives: ${rk.matched_instances} matched across ranks` + (rk.unmatched_instances ? `, ${rk.unmatched_instances} unmatched` : '') }));
    box.append(c);
    const ct = el('div'); c.append(ct);
    table(ct, [{ key: 'collective', label: 'collective' }, { key: 'instances', label: 'instances', num: true }, { key: 'wait_ns', label: 'total wait', num: true, fmt: fmtNs },
      { key: 'last', label: 'arrived last (rank: times)', cls: 'mono' }], rk.collectives.map((x) => ({ ...x, last: Object.entries(x.last_arrivals).map(([r, n]) => `${r}: ${n}`).join('  ') })), { filter: false });
    c.append(el('h3', { text: 'Longest waits: who arrived last at each collective' }));
    const lt = el('div'); c.append(lt);
    table(lt, [{ key: 'collective', label: 'collective' }, { key: 'group', label: 'group', cls: 'mono' }, { key: 'seq', label: 'seq', num: true }, { key: 'last_rank', label: 'last rank', num: true },
      { key: 'max_wait_ns', label: 'others waited up to', num: true, fmt: fmtNs }], rk.longest_waits, { filter: false, id: 'longest-waits' });
  }

  const BUILD = { overview: buildOverview, tables: buildTables, timeline: buildTimeline, memory: buildMemory, ranks: buildRanks };
  document.querySelectorAll('nav button').forEach((b) => b.addEventListener('click', () => show(b.dataset.view, true)));
  // The overview is drawn at once; the timeline's events (the bulk of the file) come after this script, so
  // a view that needs them waits for the end of the document.
  const first = HASH.get('view') || 'overview';
  try {
    show(first === 'timeline' ? 'overview' : first);
    if (state.view !== 'overview' && !built.overview) { built.overview = true; buildOverview(); }
  } finally {
    state.overviewAt = performance.now();
  }
  function loaded() {
    try { if (first === 'timeline') show('timeline'); } finally {
      state.ready = true;
      state.readyAt = performance.now();
      state.timing = { scriptStart: T_START, dataParsed: T_PARSED, overview: state.overviewAt, ready: state.readyAt };
    }
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', loaded); else loaded();
})();
