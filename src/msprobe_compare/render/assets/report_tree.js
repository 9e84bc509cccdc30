  // ---- selecting a call: table filter, tree, plot ----
  function selectCall(k, reveal) {
    if (!R.rc || k < 0) return;
    if (k < R.rc.entries.length) {
      V.call = k;
      $('call-chip').hidden = false;
      $('call-chip-text').textContent = 'call ' + entryName(k);
      applyView();
    }
    if (k < R.out.length) showCall(k);
    if (reveal) revealNode(k);
    markTree(k);
  }

  // ---- module tree ----
  const TR = { kids: null, agg: null, count: 0, rendered: new Map(), selected: -1 };

  function buildTree() {
    const rc = R.rc;
    const E = rc.entries.length;
    const N = E + rc.extra.length;
    TR.count = N;
    const parent = new Int32Array(N);
    for (let k = 0; k < N; k++) parent[k] = R.parent[k] - 1;
    // break cycles: a node whose ancestor chain returns to itself becomes a root
    const depthCap = 4096;
    for (let k = 0; k < N; k++) {
      let p = parent[k], steps = 0;
      while (p >= 0 && steps < depthCap) { if (p === k) { parent[k] = -1; break; } p = parent[p]; steps++; }
    }
    TR.parent = parent;
    const first = new Float64Array(N).fill(Infinity); // earliest call position in the subtree
    const origins = new Int32Array(N), propagated = new Int32Array(N);
    for (let k = 0; k < E; k++) {
      const s = R.states[k];
      let p = k, steps = 0;
      while (p >= 0 && steps < depthCap) {
        if (k < first[p]) first[p] = k;
        if (s === 1) origins[p]++;
        else if (s === 2) propagated[p]++;
        p = parent[p]; steps++;
      }
    }
    const kids = Array.from({ length: N }, () => null);
    const roots = [];
    for (let k = 0; k < N; k++) {
      const p = parent[k];
      if (p < 0) roots.push(k); else (kids[p] || (kids[p] = [])).push(k);
    }
    const byFirst = (a, b) => first[a] - first[b] || a - b;
    roots.sort(byFirst);
    kids.forEach((list) => { if (list) list.sort(byFirst); });
    Object.assign(TR, { kids, roots, origins, propagated, first });
    const box = $('tree');
    box.replaceChildren();
    renderChildren(box, roots, 0);
    box.addEventListener('click', (ev) => {
      const t = ev.target;
      const row = t.closest('.tn');
      if (!row) return;
      const k = +row.dataset.k;
      if (t.classList.contains('tog')) toggleNode(row.parentNode, k);
      else if (t.classList.contains('lbl')) selectCall(k, false);
    });
    $('tree-collapse').addEventListener('click', () => { box.replaceChildren(); TR.rendered.clear(); renderChildren(box, roots, 0); });
    $('tree-origins').addEventListener('click', () => { rc.origins.forEach((o) => { if (o.pos >= 0) revealNode(o.pos, true); }); });
    $('tree-card').hidden = false;
    if (rc.origins.length && rc.origins[0].pos >= 0) revealNode(rc.origins[0].pos, true);
    else if (rc.suspects && rc.suspects.length && rc.suspects[0].pos >= 0) revealNode(rc.suspects[0].pos, true);
  }

  function nodeState(k) {
    if (k < R.rc.entries.length) return R.states[k];
    return TR.origins[k] ? ST_ORIGIN : TR.propagated[k] ? ST_PROPAGATED : ST_UNKNOWN;
  }

  function nodeEl(k) {
    const wrap = el('div', 'tnode');
    const row = el('div', 'tn');
    row.dataset.k = String(k);
    row.setAttribute('role', 'treeitem');
    const has = TR.kids[k] !== null;
    row.append(el('span', 'tog', has ? '\u25b8' : '\u00b7'));
    const st = STATE_NAMES[nodeState(k)];
    const lbl = el('span', 'lbl st-' + st, entryName(k));
    lbl.title = entryName(k) + ' \u2014 ' + (k < R.rc.entries.length ? st : 'module without a recorded call');
    row.append(lbl);
    if (has && TR.origins[k] && !(k < R.rc.entries.length && R.states[k] === 1 && TR.origins[k] === 1)) {
      row.append(el('span', 'badge', TR.origins[k] + ' origin' + (TR.origins[k] > 1 ? 's' : '')));
    } else if (has && TR.propagated[k]) {
      row.append(el('span', 'badge p', TR.propagated[k] + ' propagated'));
    }
    if (k < R.rc.entries.length && R.out[k] === R.out[k]) row.append(el('span', 'score', fmtScore(R.out[k])));
    wrap.append(row);
    TR.rendered.set(k, wrap);
    return wrap;
  }

  function renderChildren(box, list, from) {
    const end = Math.min(list.length, from + TREE_CHUNK);
    const frag = document.createDocumentFragment();
    for (let j = from; j < end; j++) frag.append(nodeEl(list[j]));
    if (end < list.length) {
      const more = el('button', 'link more', 'show ' + Math.min(TREE_CHUNK, list.length - end) + ' more of ' + (list.length - end));
      more.type = 'button';
      more.addEventListener('click', () => { more.remove(); renderChildren(box, list, end); });
      frag.append(more);
    }
    box.append(frag);
  }

  function toggleNode(wrap, k, open) {
    let kids = wrap.querySelector(':scope > .kids');
    const tog = wrap.firstChild.firstChild;
    if (!TR.kids[k]) return;
    if (!kids) {
      kids = el('div', 'kids');
      kids.setAttribute('role', 'group');
      renderChildren(kids, TR.kids[k], 0);
      wrap.append(kids);
      kids.hidden = true;
    }
    kids.hidden = open === undefined ? !kids.hidden : !open;
    tog.textContent = kids.hidden ? '\u25b8' : '\u25be';
  }

  function revealNode(k, quiet) {
    if (!TR.kids || k < 0) return;
    const path = [];
    for (let p = k, steps = 0; p >= 0 && steps < 4096; p = TR.parent[p], steps++) path.push(p);
    path.reverse();
    for (let j = 0; j < path.length; j++) {
      const node = path[j];
      while (!TR.rendered.has(node)) {
        const box = j === 0 ? $('tree') : TR.rendered.get(path[j - 1]).querySelector(':scope > .kids');
        const more = box && box.querySelector(':scope > .more');
        if (!more) break;
        more.click();
      }
      const wrap = TR.rendered.get(node);
      if (!wrap) return;
      if (j < path.length - 1) toggleNode(wrap, node, true);
    }
    const row = TR.rendered.get(k).firstChild;
    const tree = $('tree');
    const top = row.getBoundingClientRect().top - tree.getBoundingClientRect().top + tree.scrollTop;
    tree.scrollTop = Math.max(0, top - tree.clientHeight / 3);
    if (!quiet) { row.classList.remove('flash'); void row.offsetWidth; row.classList.add('flash'); }
  }

  function markTree(k) {
    if (TR.selected >= 0 && TR.rendered.has(TR.selected)) TR.rendered.get(TR.selected).firstChild.classList.remove('sel');
    TR.selected = k;
    if (k >= 0 && TR.rendered.has(k)) TR.rendered.get(k).firstChild.classList.add('sel');
  }
