  // ---- summary ----
  // the dump modes in plain words (the reference calls them summary, md5 and all)
  const MODE_TEXT = { summary: 'statistics (max, min, mean, norm per tensor)', md5: 'checksums (md5 per tensor)',
    all: 'real data (tensors)' };
  const LEVEL_TEXT = { L0: 'L0 (modules)', L1: 'L1 (APIs)', mix: 'mix (modules and APIs)', L2: 'L2 (kernels)' };

  function modeText(mode) {
    return MODE_TEXT[mode] || mode;
  }

  function buildCompared(c) { // what was compared: the dumps, framework, dump mode and level, version, command
    const dl = $('compared');
    const add = (k, v, cls) => { if (!v) return; dl.append(el('dt', null, k), el('dd', cls || null, v)); };
    const side = (d) => [d.task, d.level && (LEVEL_TEXT[d.level] || d.level), d.framework].filter(Boolean).join(', ');
    const npu = c.npu_dump || {}, bench = c.bench_dump || {};
    add('NPU dump', c.npu + (side(npu) ? ' (' + side(npu) + ')' : ''));
    add('bench dump', c.bench + (side(bench) ? ' (' + side(bench) + ')' : ''));
    add('framework', c.framework);
    add('data compared', modeText(R.meta.mode));
    const level = npu.level || bench.level;
    if (level) add('dump level', LEVEL_TEXT[level] || level);
    add('tool', 'msprobe-compare ' + c.version);
    add('command', c.command, 'cmd');
    dl.hidden = false;
  }

  function buildSummary() {
    const m = R.meta;
    document.title = m.title;
    $('title').textContent = m.title;
    $('subtitle').textContent = modeText(m.mode) + ' \u00b7 generated ' + m.generated;
    if (m.compared) buildCompared(m.compared);
    if (m.partial) { // a large table: the page holds the rows that matter and a sample (render/html.py kept_rows)
      const p = m.partial, fmt = (x) => x.toLocaleString('en-US');
      const note = $('partial-note');
      note.textContent = 'This report holds ' + fmt(m.n) + ' of the table\'s ' + fmt(p.total) + ' rows: the rows of ' +
        'origin and suspect calls, the red, yellow and unmatched rows (up to ' + fmt(p.limit - p.sample) + '), and an ' +
        'even sample of ' + fmt(p.sample) + '. Every row is in ' +
        (p.tables.length ? p.tables.join(' and ') : 'the result table (write it with --format csv or xlsx)') + '.';
      note.hidden = false;
    }
    const c = m.counts;
    const counts = $('counts');
    const add = (label, value, cls) => {
      const box = el('span', 'count' + (cls ? ' ' + cls : ''));
      box.append(el('b', null, value === null ? 'n/a' : typeof value === 'number' ? value.toLocaleString('en-US') : value),
        document.createTextNode(' ' + label));
      counts.append(box);
    };
    add('data', modeText(m.mode));
    add('rows', c.total);
    add('matched', c.matched);
    add('unmatched', c.unmatched);
    add('red', c.red, 'red');
    add('yellow', c.yellow, 'yellow');
    if (c.errors !== undefined) add('error rows', c.errors, c.errors ? 'red' : null);
    if (c.warnings !== undefined) add('warning rows', c.warnings, c.warnings ? 'yellow' : null);
    if (c.excluded) add('excluded (in-place inputs)', c.excluded);
    if (c.fuzzy) add('fuzzy-matched', c.fuzzy);
    if (m.unmatched_warning) {
      const warn = el('p', 'unmatched-warning', m.unmatched_warning);
      warn.id = 'unmatched-warning';
      counts.after(warn);
    }
    if (m.advisor) {
      $('advisor').hidden = false;
      $('advisor-text').textContent = m.advisor.join('\n');
    }
    if (m.alignment) buildAlignment(m.alignment);
    const main = $('origin-main');
    const rc = R.rc;
    if (!rc) {
      main.append(el('p', 'muted', 'No root-cause analysis in this report.'));
      return;
    }
    if (!rc.origins.length) {
      const head = m.headline || { state: 'none', text: 'no origin; every compared call agrees within tolerance.' };
      // "nothing": no call could be compared; "partial": no origin among the compared calls, some not compared
      // "suspect": no origin the precision can support, a suspect (amber like partial: not agreement)
      const card = el('div', 'origin-card ' + (head.state === 'nothing' ? 'nothing' : head.state === 'partial' || head.state === 'suspect' ? 'partial' : 'none'));
      const text = head.text.charAt(0).toUpperCase() + head.text.slice(1);
      card.append(el('div', 'muted', 'Root cause'), el('div', 'desc', text));
      card.id = 'origin-' + head.state;
      main.append(card);
      (rc.suspects || []).forEach((x, j) => main.append(suspectCard(x, j === 0)));
      return;
    }
    main.append(originCard(rc.origins[0], true, rc.origins.length));
    if (rc.origins.length > 1) {
      $('origin-more').hidden = false;
      $('origin-more-title').textContent = 'All ' + rc.origins.length + ' origins, ranked';
      const list = $('origin-list');
      rc.origins.forEach((o) => {
        const li = el('li');
        li.append(el('span', 'tag', o.kind), el('span', 'tag', o.phase), document.createTextNode(o.description + ' '));
        li.append(callLink(o.pos, 'show'));
        list.append(li);
      });
    }
  }

  function callLink(pos, text) {
    const b = el('button', 'link', text);
    b.type = 'button';
    b.addEventListener('click', () => selectCall(pos, true));
    return b;
  }

  // an origin or suspect card: tags, a subtitle, the description, then `fill(row)` adds the named rows
  function callCard(cls, kind, phase, subtitle, description, pos, fill) {
    const card = el('div', cls);
    const head = el('div');
    head.append(el('span', 'tag kind', kind), el('span', 'tag', phase), el('span', 'muted', subtitle));
    card.append(head, el('div', 'desc', description));
    const dl = el('dl');
    const row = (k, v) => { dl.append(el('dt', null, k)); const dd = el('dd'); if (v instanceof Node) dd.append(v); else dd.textContent = v; dl.append(dd); };
    fill(row);
    const links = el('span');
    links.append(callLink(pos, 'show its rows and place in the tree'));
    row('', links);
    card.append(dl);
    return card;
  }

  function originCard(o, first, total) {
    const subtitle = first ? 'First origin (where the two runs first part)' + (total > 1 ? ', 1 of ' + total : '') : '';
    return callCard('origin-card', o.kind, o.phase, subtitle, o.description, o.pos, (row) => {
      const ev = o.evidence;
      row('call', o.entry);
      row('phase', o.phase);
      if (o.after) row('after', o.after);
      row('evidence', ev.text || (ev.metric + ': inputs ' + fmtScore(ev.inputs) + ', outputs ' + fmtScore(ev.outputs) +
        ' (differs above ' + fmtScore(ev.threshold) + ')'));
      row('first differing row', ev.first_row || 'n/a');
      if (o.args && o.args.length) row('differing arguments', o.args.join(', '));
      const frames = o.stack ? frameList(o.stack) : [];
      if (frames.length) row('code (your frames first)', stackBox(frames));
      row('advice', o.advice);
    });
  }
