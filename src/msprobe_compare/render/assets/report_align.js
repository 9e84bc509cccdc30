  // ---- runs of different code: the alignment's line in the summary, the two module trees ----
  function buildAlignment(a) { // runs of different code: the two trees' modules side by side, paired (pair/align.py)
    $('alignment').hidden = false;
    const merged = a.pairs.filter((p) => p.npu.includes(';') || p.bench.includes(';')).length;
    $('alignment-title').textContent = 'Module alignment (runs of different code): ' + a.pairs.length +
      ' pairs, ' + merged + ' merged; ' + a.unpaired.npu.length + ' npu and ' + a.unpaired.bench.length +
      ' bench module calls without a counterpart';
    const tbl = el('table', 'alignment-table');
    const head = el('tr');
    for (const h of ['npu module(s)', 'bench module(s)', 'paired by', 'tensors (npu \u2192 bench)']) head.append(el('th', null, h));
    tbl.append(head);
    const row = (npu, bench, how, slots) => {
      const tr = el('tr');
      tr.append(el('td', null, npu.split(';').join(';\n')), el('td', null, bench.split(';').join(';\n')),
        el('td', null, how), el('td', null, slots));
      tbl.append(tr);
    };
    for (const p of a.pairs) {
      const slots = Object.entries(p.slots).map(([k, v]) => k + ' \u2192 ' + v).join(', ');
      row(p.npu, p.bench, p.how, slots || '(no tensor in common)');
    }
    for (const n of a.unpaired.npu) row(n, '\u2014', 'npu only', '');
    for (const b of a.unpaired.bench) row('\u2014', b, 'bench only', '');
    $('alignment-table-box').append(tbl);
    const box = $('alignment');
    const build = () => { if (box.open && !AT.sides) buildAlignTrees(a); };
    box.addEventListener('toggle', build); // drawn when first opened, not before
    build();
  }

  // ---- the two module trees side by side, each module linked to its counterpart (runs of different code) ----
  const AT = { sides: null, pinned: -1, lit: [] };
  const ALIGN_OPEN_ROWS = 200; // rows drawn unfolded at first; deeper layers wait for a click

  function alignSide(a, side) { // the side's module calls as a tree: nesting from the dotted paths
    const nodes = new Map();
    const order = new Map(((a.order && a.order[side]) || []).map((n, i) => [n, i]));
    const add = (name, implicit) => {
      let n = nodes.get(name);
      if (n) { if (!implicit) n.implicit = false; return n; }
      n = { name, side, implicit, parent: null, kids: [], pair: -1, wraps: null, fold: null, mark: null,
        key: order.has(name) ? order.get(name) : 1e9 + nodes.size, wrap: null };
      nodes.set(name, n);
      return n;
    };
    a.pairs.forEach((p, i) => p[side].split(';').forEach((name) => { add(name, false).pair = i; }));
    a.unpaired[side].forEach((name) => add(name, false));
    const sameAs = (a.same_as && a.same_as[side]) || {};
    for (const [w, c] of Object.entries(sameAs)) { add(c, false); add(w, false).wraps = c; }
    for (const [w, c] of Object.entries(sameAs)) nodes.get(w).pair = nodes.get(c).pair; // the same boundary
    const queue = Array.from(nodes.values());
    while (queue.length) { // a module's parent: its longest dotted prefix (`path#n`: that prefix's n-th call if any)
      const n = queue.pop();
      const hash = n.name.indexOf('#');
      const base = hash < 0 ? n.name : n.name.slice(0, hash), tail = hash < 0 ? '' : n.name.slice(hash);
      const dot = base.lastIndexOf('.');
      if (dot <= 0) continue;
      const up = base.slice(0, dot);
      const pname = tail && nodes.has(up + tail) ? up + tail : up;
      const fresh = !nodes.has(pname);
      n.parent = add(pname, true);
      n.parent.kids.push(n);
      if (fresh) queue.push(n.parent);
    }
    const roots = Array.from(nodes.values()).filter((n) => !n.parent);
    const first = (n) => { for (const k of n.kids) n.key = Math.min(n.key, first(k)); return n.key; };
    roots.forEach(first);
    const byKey = (x, y) => x.key - y.key;
    roots.sort(byKey);
    nodes.forEach((n) => n.kids.sort(byKey));
    nodes.forEach((n) => { // a wrapper around its call alone is folded into that call's row
      if (n.wraps && n.kids.length === 1 && n.kids[0].name === n.wraps) n.fold = n.kids[0];
    });
    return { side, nodes, roots, box: null };
  }

  function buildAlignTrees(a) {
    const t0 = performance.now();
    const sides = { npu: alignSide(a, 'npu'), bench: alignSide(a, 'bench') };
    AT.sides = sides;
    AT.a = a;
    AT.members = a.pairs.map(() => ({ npu: [], bench: [] }));
    for (const S of Object.values(sides)) S.nodes.forEach((n) => { if (n.pair >= 0) AT.members[n.pair][S.side].push(n); });
    const marks = (a.marks && a.marks.npu) || {};
    for (const [name, kind] of Object.entries(marks)) {
      const n = sides.npu.nodes.get(name);
      if (!n) continue;
      n.mark = kind;
      if (n.pair >= 0) for (const b of AT.members[n.pair].bench) if (!b.mark) b.mark = kind + "'s counterpart";
    }
    for (const S of Object.values(sides)) { // a folded row tells what it holds
      S.nodes.forEach((n) => { if (n.mark) for (let p = n.parent; p && !p.inner; p = p.parent) p.inner = n.mark; });
    }
    const host = $('align-trees');
    host.replaceChildren();
    for (const S of Object.values(sides)) {
      const col = el('div', 'align-side');
      col.dataset.side = S.side;
      let calls = 0, alone = 0;
      S.nodes.forEach((n) => { if (!n.implicit) { calls++; if (n.pair < 0) alone++; } });
      col.append(el('div', 'align-head', S.side + ' tree: ' + calls + ' module calls, ' + alone + ' without a counterpart'));
      S.box = el('div', 'tree align-tree');
      S.box.setAttribute('role', 'tree');
      col.append(S.box);
      host.append(col);
      S.roots.forEach((n) => S.box.append(alignNodeEl(n)));
      let shown = S.roots.length; // unfold breadth first while few rows show
      const queue = S.roots.slice();
      while (queue.length) {
        const n = queue.shift();
        const kids = (n.fold || n).kids;
        if (!kids.length || shown + kids.length > ALIGN_OPEN_ROWS) continue;
        alignToggle(n, true);
        shown += kids.length;
        queue.push(...kids);
      }
      S.nodes.forEach((n) => { if (n.mark) alignReveal(n); });
      S.box.addEventListener('click', (ev) => {
        const row = ev.target.closest('.an');
        if (!row) return;
        const n = S.nodes.get(row.dataset.name);
        if (ev.target.classList.contains('tog')) { alignToggle(n); return; }
        alignPin(AT.pinned === n.pair && n.pair >= 0 ? -1 : n.pair, n);
      });
      S.box.addEventListener('mouseover', (ev) => {
        const row = ev.target.closest('.an');
        if (row && AT.pinned < 0) alignLight(S.nodes.get(row.dataset.name).pair);
      });
      S.box.addEventListener('mouseleave', () => { if (AT.pinned < 0) alignLight(-1); });
    }
    const openAll = (list) => list.forEach((n) => { alignToggle(n, true); openAll((n.fold || n).kids); });
    $('align-expand').onclick = () => { for (const S of Object.values(sides)) openAll(S.roots); alignLight(AT.pinned); };
    $('align-collapse').onclick = () => {
      for (const S of Object.values(sides)) S.nodes.forEach((n) => { if (n.parent) alignToggle(n, false); });
      alignLight(AT.pinned);
    };
    timings.alignTrees = performance.now() - t0;
  }

  function alignNodeEl(n) {
    const shown = n.fold || n; // a folded wrapper: one row for the wrapper and the call it wraps
    const wrap = el('div', 'tnode');
    const row = el('div', 'tn an');
    row.dataset.name = n.name;
    row.setAttribute('role', 'treeitem');
    row.append(el('span', 'tog', shown.kids.length ? '\u25b8' : '\u00b7'));
    const rel = (m) => (m.parent ? m.name.slice(m.parent.name.length + 1) : m.name);
    const lbl = el('span', 'lbl', n.fold ? rel(n) + ' \u203a ' + rel(n.fold) : rel(n));
    row.append(lbl);
    const p = n.pair >= 0 ? AT.a.pairs[n.pair] : null;
    if (n.implicit) {
      row.classList.add('implicit');
      lbl.title = n.name + ' \u2014 not a module call of the ' + n.side + ' dump (a container of its modules)';
    } else if (!p) {
      row.classList.add('unpaired');
      row.append(el('span', 'tag alone', 'no counterpart'));
      lbl.title = n.name + ' \u2014 no counterpart in the ' + (n.side === 'npu' ? 'bench' : 'npu') + ' run';
    } else {
      const other = n.side === 'npu' ? 'bench' : 'npu';
      const mine = p[n.side].split(';'), theirs = p[other].split(';');
      row.classList.add('paired');
      row.append(el('span', 'tag how', p.how));
      if (mine.length > 1) row.append(el('span', 'tag merged', 'merged ' + (mine.indexOf(n.name) + 1) + '/' + mine.length));
      lbl.title = n.name + (n.fold ? ' (wraps ' + n.fold.name + ')' : '') + ' \u2194 ' + theirs.join('; ') + ' (' + p.how + ')';
    }
    if (n.wraps && !n.fold) row.append(el('span', 'tag wrapper', 'wrapper of ' + n.wraps));
    if (n.fold) n.fold.wrap = wrap;
    const mark = n.mark || (n.fold && n.fold.mark);
    if (mark) {
      const st = mark.startsWith('suspect') ? 'suspect' : 'origin';
      row.classList.add('marked');
      row.prepend(el('i', 'dot st-' + st));
      row.append(el('span', 'tag mark st-' + st, mark));
    } else if (shown.inner) {
      const dot = el('i', 'dot inner st-' + (shown.inner.startsWith('suspect') ? 'suspect' : 'origin'));
      dot.title = 'holds the ' + shown.inner;
      row.append(dot);
    }
    wrap.append(row);
    n.wrap = wrap;
    return wrap;
  }

  function alignToggle(n, open) {
    const shown = n.fold || n;
    if (!n.wrap || !shown.kids.length) return;
    let kids = n.wrap.querySelector(':scope > .kids');
    if (!kids) {
      kids = el('div', 'kids');
      kids.setAttribute('role', 'group');
      shown.kids.forEach((k) => kids.append(alignNodeEl(k)));
      n.wrap.append(kids);
      kids.hidden = true;
    }
    kids.hidden = open === undefined ? !kids.hidden : !open;
    n.wrap.firstChild.firstChild.textContent = kids.hidden ? '\u25b8' : '\u25be';
  }

  function alignReveal(n) { // unfold the ancestors of a module so that its row shows
    const path = [];
    for (let p = n.parent; p; p = p.parent) path.push(p);
    path.reverse().forEach((p) => { if (p.fold !== n) alignToggle(p, true); });
  }

  function alignRow(n) { // the row showing a module: its own, else its nearest drawn and unfolded ancestor's
    let m = n, inside = false;
    while (m) {
      const wrap = m.wrap;
      if (wrap && wrap.isConnected && !wrap.closest('.kids[hidden]')) return { row: wrap.firstChild, inside };
      m = m.parent; inside = true;
    }
    return null;
  }

  function alignLight(i) { // highlight pair i's modules on both sides (-1: none)
    AT.lit.forEach(([row, cls]) => row.classList.remove(cls));
    AT.lit = [];
    if (i < 0) return;
    for (const side of ['npu', 'bench']) {
      for (const n of AT.members[i][side]) {
        const at = alignRow(n);
        if (!at) continue;
        const cls = at.inside ? 'hl-in' : 'hl';
        at.row.classList.add(cls);
        AT.lit.push([at.row, cls]);
      }
    }
  }

  function alignPin(i, n) { // a click: pin pair i, unfold and scroll to its modules, say what pairs them
    AT.pinned = i;
    const info = $('align-info');
    if (i < 0) {
      alignLight(-1);
      info.textContent = n.implicit ? n.name + ': not a module call of the ' + n.side + ' dump'
        : n.pair < 0 ? n.name + ': no counterpart in the ' + (n.side === 'npu' ? 'bench' : 'npu') + ' run' : '\u00a0';
      return;
    }
    const p = AT.a.pairs[i];
    for (const side of ['npu', 'bench']) {
      const S = AT.sides[side];
      AT.members[i][side].forEach(alignReveal);
      const first = AT.members[i][side][0];
      const at = first && alignRow(first);
      if (at && side !== n.side) {
        const r = at.row.getBoundingClientRect(), b = S.box.getBoundingClientRect();
        if (r.top < b.top || r.bottom > b.bottom) S.box.scrollTop += r.top - b.top - S.box.clientHeight / 3;
      }
    }
    alignLight(i);
    const slots = Object.entries(p.slots).map(([k, v]) => k + ' \u2192 ' + v).join(', ');
    const np = p.npu.split(';').length, nb = p.bench.split(';').length;
    info.textContent = 'npu ' + p.npu.split(';').join('; ') + '  \u21c4  bench ' + p.bench.split(';').join('; ') +
      ' \u2014 paired by ' + p.how + (np > 1 || nb > 1 ? ' (merged: ' + np + ' npu to ' + nb + ' bench)' : '') +
      '; tensors: ' + (slots || 'none in common');
  }
