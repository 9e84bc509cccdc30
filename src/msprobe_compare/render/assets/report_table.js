  // ---- table: virtual rendering ----
  const T = { grid: null, tbl: null, tbody: null, spacer: null, pool: [], rowH: 24, headH: 26, pending: false };

  // The columns shown by default, per dump mode: the name, the key metrics, the verdict and its message; the
  // "columns" control shows the rest. A table with few of these (other layouts) shows every column.
  const COMPACT = {
    summary: ['NPU Name', 'NPU Dtype', 'NPU Tensor Shape', 'Max diff', 'MaxRelativeErr', 'NormRelativeErr', 'NPU max',
      'Bench max', 'Result', 'Err_message', 'NPU_Stack_Info'],
    md5: ['NPU Name', 'NPU Dtype', 'NPU Tensor Shape', 'NPU MD5', 'BENCH MD5', 'Result', 'Err_message', 'NPU_Stack_Info'],
    all: ['NPU Name', 'NPU Dtype', 'NPU Tensor Shape', 'Cosine', 'MaxAbsErr', 'MaxRelativeErr',
      'One Thousandth Err Ratio', 'Accuracy Reached or Not', 'Err_message', 'NPU_Stack_Info'],
  };
  // the reference's column names, explained (header tooltips and the columns control)
  const COLUMN_HELP = {
    'Max diff': 'NPU max - bench max', 'Min diff': 'NPU min - bench min', 'Mean diff': 'NPU mean - bench mean',
    'L2norm diff': 'NPU L2 norm - bench L2 norm',
    MaxRelativeErr: 'relative error in %: |diff| / |bench| x 100 (real data: the largest relative error of the elements)',
    MinRelativeErr: 'relative error of the minimum, in %', MeanRelativeErr: 'relative error of the mean, in %',
    NormRelativeErr: 'relative error of the L2 norm, in %',
    Cosine: 'cosine similarity of the two tensors (1: same direction)', EucDist: 'Euclidean distance of the two tensors',
    MaxAbsErr: 'largest |NPU - bench| over the elements',
    'One Thousandth Err Ratio': 'share of elements with relative error below 0.001',
    'Five Thousandths Err Ratio': 'share of elements with relative error below 0.005',
    'Accuracy Reached or Not': "the reference tool's verdict for the row", Result: "the reference tool's verdict for the row",
    Err_message: 'why the row was judged so', 'Requires_grad Consistent': 'whether both sides agree on requires_grad',
    NPU_Stack_Info: "where the call was made: your code's innermost frame (+ the other frames); open a row for all",
    Data_name: 'the tensor files compared',
  };

  function compactColumns() {
    const want = COMPACT[R.meta.mode] || [];
    const shown = R.cols.map((c, i) => i).filter((i) => i === R.nameCol || want.includes(R.cols[i].name));
    return shown.length >= 3 ? shown : R.cols.map((c, i) => i);
  }

  function buildTable() {
    T.grid = $('grid'); T.tbl = $('tbl'); T.tbody = T.tbl.tBodies[0]; T.spacer = $('spacer');
    const probe = el('span', null, '0000000000');
    probe.style.cssText = 'position:absolute;visibility:hidden;font:12.5px/1 ui-monospace, Menlo, Consolas, monospace';
    document.body.append(probe);
    T.charW = Math.max(5, probe.getBoundingClientRect().width / 10);
    probe.remove();
    T.widths = R.cols.map((col, ci) => {
      let len = col.name.length;
      const sample = Math.min(R.n, 300);
      for (let i = 0; i < sample; i++) len = Math.max(len, Math.min(80, shownText(col, i).length));
      const cap = ci === R.nameCol || /Name$/.test(col.name) ? 60 : col.stack ? 48 : 28;
      return Math.round(Math.min(cap, Math.max(5, len)) * T.charW + 14);
    });
    T.shown = compactColumns();
    buildColumns();
    T.tbl.tHead.rows[0].addEventListener('click', (ev) => {
      const th = ev.target.closest('th');
      if (!th || th.dataset.col === undefined) return;
      sortBy(+th.dataset.col, th);
    });
    T.tbody.addEventListener('click', (ev) => {
      const tr = ev.target.closest('tr');
      if (tr && tr.dataset.row) showRow(+tr.dataset.row);
    });
    T.grid.addEventListener('scroll', () => {
      if (!T.pending) { T.pending = true; requestAnimationFrame(() => { T.pending = false; renderRows(); }); }
    }, { passive: true });
    window.addEventListener('resize', () => layoutTable());
    buildColumnPicker();
  }

  function buildColumns() { // header, column widths and an empty row pool for the shown columns
    const headRow = T.tbl.tHead.rows[0];
    const colgroup = T.tbl.querySelector('colgroup');
    headRow.replaceChildren();
    colgroup.replaceChildren();
    T.tbody.replaceChildren();
    T.pool = [];
    const stateCol = el('col'); stateCol.style.width = '6px'; colgroup.append(stateCol);
    const th0 = el('th', null, ''); th0.title = 'call state'; headRow.append(th0);
    let total = 6;
    for (const ci of T.shown) {
      const col = R.cols[ci], w = T.widths[ci];
      const c = el('col'); c.style.width = w + 'px'; colgroup.append(c);
      total += w;
      const sorted = V.sortCol === ci;
      const th = el('th', (ci === R.nameCol ? 'name' : '') + (sorted ? ' sorted' : ''),
        col.name + (sorted ? (V.sortDir > 0 ? ' \u25b2' : ' \u25bc') : ''));
      th.title = col.name + (COLUMN_HELP[col.name] ? ' \u2014 ' + COLUMN_HELP[col.name] : '') + ' \u2014 click to sort';
      th.dataset.col = String(ci);
      headRow.append(th);
    }
    T.tbl.style.width = total + 'px';
    T.headH = T.tbl.tHead.getBoundingClientRect().height || 26;
    const tr = ensurePool(1)[0];
    tr.hidden = false;
    T.rowH = tr.getBoundingClientRect().height || 24;
  }

  function buildColumnPicker() { // the "columns" control: a check box per column, compact and all
    const box = $('columns-list');
    const sync = () => {
      box.querySelectorAll('input').forEach((inp) => { inp.checked = T.shown.includes(+inp.value); });
      $('columns-title').textContent = 'columns (' + T.shown.length + ' of ' + R.cols.length + ')';
    };
    R.cols.forEach((col, ci) => {
      const label = el('label');
      const inp = el('input');
      inp.type = 'checkbox'; inp.value = String(ci); inp.disabled = ci === R.nameCol;
      label.append(inp, document.createTextNode(' ' + col.name));
      if (COLUMN_HELP[col.name]) label.title = COLUMN_HELP[col.name];
      box.append(label);
    });
    const apply = (shown) => {
      T.shown = shown;
      buildColumns();
      sync();
      layoutTable();
    };
    box.addEventListener('change', () => {
      apply(Array.from(box.querySelectorAll('input')).filter((x) => x.checked || +x.value === R.nameCol).map((x) => +x.value));
    });
    $('columns-compact').addEventListener('click', () => apply(compactColumns()));
    $('columns-all').addEventListener('click', () => apply(R.cols.map((c, i) => i)));
    sync();
  }

  function ensurePool(count) {
    while (T.pool.length < count) {
      const tr = el('tr');
      tr.append(el('td', 'rowstate'));
      for (const ci of T.shown) tr.append(el('td', ci === R.nameCol ? 'name' : R.cols[ci].numeric ? 'num' : null));
      tr.hidden = true;
      T.tbody.append(tr);
      T.pool.push(tr);
    }
    return T.pool;
  }

  function visibleRows() {
    return Math.max(1, Math.floor((T.grid.clientHeight - T.headH) / T.rowH));
  }

  function layoutTable() {
    const total = V.view.length;
    const rows = Math.min(total, visibleRows());
    ensurePool(rows);
    T.pool.forEach((tr, r) => { tr.hidden = r >= rows; });
    const virt = Math.min(total * T.rowH, MAX_SCROLL_PX);
    T.spacer.style.height = Math.max(0, virt - rows * T.rowH) + 'px';
    renderRows();
  }

  function renderRows() {
    const view = V.view, total = view.length;
    const rows = Math.min(total, visibleRows());
    const maxFirst = Math.max(0, total - rows);
    const range = T.grid.scrollHeight - T.grid.clientHeight;
    const first = range > 0 ? Math.min(maxFirst, Math.round(T.grid.scrollTop / range * maxFirst)) : 0;
    const cols = R.cols, shown = T.shown;
    for (let r = 0; r < rows; r++) {
      const tr = T.pool[r];
      const row = view[first + r];
      tr.dataset.row = String(row);
      tr.className = 'c-' + COLOUR_NAMES[R.colour[row]] + (row === V.selected ? ' sel' : '');
      const cells = tr.cells;
      const st = STATE_NAMES[rowState(row)];
      cells[0].className = 'rowstate st-' + st;
      cells[0].title = 'call ' + st;
      for (let j = 0; j < shown.length; j++) {
        const col = cols[shown[j]];
        const text = shownText(col, row);
        const td = cells[j + 1];
        if (td.textContent !== text) {
          const full = cellText(col, row);
          td.textContent = text;
          td.title = full !== text || text.length > 24 ? full : '';
        }
      }
    }
    $('grid').dataset.first = String(first);
    $('grid').dataset.rendered = String(rows);
  }

  function sortBy(ci, th) {
    if (V.sortCol === ci) {
      if (V.sortDir === 1) V.sortDir = -1; else { V.sortCol = -1; V.sortDir = 1; }
    } else { V.sortCol = ci; V.sortDir = 1; }
    T.tbl.tHead.querySelectorAll('th').forEach((h) => {
      h.classList.remove('sorted');
      if (h.dataset.col !== undefined) h.textContent = R.cols[+h.dataset.col].name;
    });
    if (V.sortCol >= 0) {
      th.classList.add('sorted');
      th.textContent = R.cols[ci].name + (V.sortDir > 0 ? ' \u25b2' : ' \u25bc');
    }
    document.body.style.cursor = 'progress';
    setTimeout(() => { applyView(); document.body.style.cursor = ''; }, 0);
  }

  function showRow(row) {
    V.selected = row;
    renderRows();
    const box = $('detail');
    box.hidden = false;
    box.replaceChildren();
    const head = el('div', 'head');
    head.append(el('b', null, 'Row ' + ((R.rowIndex ? R.rowIndex[row] : row) + 1)));
    if (R.rc) {
      const e = R.rowEntry[row];
      const st = STATE_NAMES[rowState(row)];
      head.append(el('span', null, 'call '), el('span', 'st-' + st, entryName(e) + ' (' + st + ')'));
      const b = el('button', 'link', 'show this call');
      b.type = 'button';
      b.addEventListener('click', () => selectCall(e, true));
      head.append(b);
    }
    const close = el('button', null, 'close');
    close.type = 'button';
    close.addEventListener('click', () => { box.hidden = true; V.selected = -1; renderRows(); });
    head.append(close);
    const dl = el('dl');
    R.cols.forEach((col) => {
      const text = cellText(col, row);
      const frames = col.stack ? cellFrames(text) : [];
      const dd = el('dd');
      if (frames.length) dd.append(stackBox(frames)); else dd.textContent = text;
      dl.append(el('dt', null, col.name), dd);
    });
    box.append(head, dl);
    box.scrollIntoView({ block: 'nearest' });
  }

  function bindFilters() {
    let timer = 0;
    $('filter').addEventListener('input', (ev) => {
      clearTimeout(timer);
      const value = ev.target.value;
      timer = setTimeout(() => { V.text = value; applyView(); }, 120);
    });
    $('colour-filter').addEventListener('change', (ev) => {
      V.colours[+ev.target.value] = ev.target.checked;
      applyView();
    });
    $('state-filter').addEventListener('change', (ev) => {
      V.state = ev.target.value === '' ? -1 : +ev.target.value;
      applyView();
    });
    $('call-chip-clear').addEventListener('click', () => { V.call = -1; $('call-chip').hidden = true; markTree(-1); applyView(); });
  }
