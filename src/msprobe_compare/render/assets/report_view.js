  // ---- table: view (filter + sort) ----
  const V = { view: null, sortCol: -1, sortDir: 1, order: null, orders: new Map(), text: '', colours: [true, true, true],
    state: -1, call: -1, selected: -1, lowerDict: null };

  function sortOrder(ci, dir) {
    const key = ci + ':' + dir;
    if (V.orders.has(key)) return V.orders.get(key);
    const col = R.cols[ci];
    const n = R.n;
    const dictKey = dictNumbers(col);
    const rank = dictRanks(col);
    const grp = new Uint8Array(n);
    const val = new Float64Array(n);
    const codes = col.codes(), nums = col.hasNum ? col.values() : null;
    for (let i = 0; i < n; i++) {
      const k = codes[i];
      const v = k < K_STR ? nums[i] : dictKey[k - K_STR];
      if (v === v) { val[i] = v; } else { grp[i] = 1; val[i] = k < K_STR ? -1 : rank[k - K_STR]; }
    }
    const idx = new Uint32Array(n);
    for (let i = 0; i < n; i++) idx[i] = i;
    idx.sort((a, b) => {
      const g = grp[a] - grp[b];
      if (g) return g;
      const d = val[a] - val[b];
      return (d > 0 ? dir : d < 0 ? -dir : 0) || a - b;
    });
    V.orders.set(key, idx);
    return idx;
  }

  const dictCache = new Map();
  function dictNumbers(col) {
    const id = 'n' + col.dictId;
    if (!dictCache.has(id)) dictCache.set(id, Float64Array.from(col.dict, textNumber));
    return dictCache.get(id);
  }

  function dictRanks(col) {
    const id = 'r' + col.dictId;
    if (!dictCache.has(id)) {
      const d = col.dict;
      const order = Array.from(d.keys());
      const coll = new Intl.Collator('en', { numeric: true });
      order.sort(d.length <= 200000 ? (a, b) => coll.compare(d[a], d[b]) : (a, b) => (d[a] < d[b] ? -1 : d[a] > d[b] ? 1 : 0));
      const rank = new Float64Array(d.length);
      order.forEach((k, r) => { rank[k] = r; });
      dictCache.set(id, rank);
    }
    return dictCache.get(id);
  }

  function nameMatcher() {
    const words = V.text.toLowerCase().split(/\s+/).filter(Boolean);
    if (!words.length) return null;
    const col = R.cols[R.nameCol];
    if (!V.lowerDict) V.lowerDict = col.dict.map((s) => s.toLowerCase());
    const hit = new Uint8Array(col.dict.length);
    const d = V.lowerDict;
    for (let k = 0; k < d.length; k++) {
      let ok = 1;
      for (let w = 0; w < words.length; w++) if (d[k].indexOf(words[w]) < 0) { ok = 0; break; }
      hit[k] = ok;
    }
    const codes = col.codes();
    return (row) => { const k = codes[row]; return k >= K_STR ? hit[k - K_STR] === 1 : false; };
  }

  function warmNameFilter() { // lower-case the names in idle slices, so the first filter is quick
    const d = R.cols[R.nameCol].dict, out = new Array(d.length);
    let i = 0;
    const step = () => {
      if (V.lowerDict) return;
      const end = Math.min(d.length, i + 50000);
      for (; i < end; i++) out[i] = d[i].toLowerCase();
      if (i < d.length) setTimeout(step, 0); else V.lowerDict = out;
    };
    setTimeout(step, 100);
  }

  function applyView() {
    const n = R.n;
    const base = V.sortCol >= 0 ? sortOrder(V.sortCol, V.sortDir) : null;
    const byName = nameMatcher();
    const colours = V.colours;
    const allColours = colours[0] && colours[1] && colours[2];
    const state = V.state, call = V.call;
    if (!byName && allColours && state < 0 && call < 0) {
      if (base) V.view = base;
      else { const v = new Uint32Array(n); for (let i = 0; i < n; i++) v[i] = i; V.view = v; }
    } else {
      const out = new Uint32Array(n);
      let m = 0;
      const col = R.colour, ent = R.rowEntry, st = R.states;
      for (let j = 0; j < n; j++) {
        const i = base ? base[j] : j;
        if (!allColours && !colours[col[i]]) continue;
        if (call >= 0 && ent[i] !== call) continue;
        if (state >= 0 && (st ? st[ent[i]] : ST_UNKNOWN) !== state) continue;
        if (byName && !byName(i)) continue;
        out[m++] = i;
      }
      V.view = out.subarray(0, m);
    }
    $('row-count').textContent = (V.view.length === n ? n.toLocaleString('en-US') + ' rows'
      : 'showing ' + V.view.length.toLocaleString('en-US') + ' of ' + n.toLocaleString('en-US') + ' rows') +
      (R.meta.partial ? ' (of ' + R.meta.partial.total.toLocaleString('en-US') + ' in the table)' : '');
    $('grid').dataset.matching = String(V.view.length);
    $('grid').dataset.filterText = V.text;
    $('grid').dataset.sort = V.sortCol + ':' + V.sortDir;
    T.grid.scrollTop = 0;
    layoutTable();
  }
