// msprobe compare report: decodes the embedded payload (format: render/html.py) and builds the summary,
// the metric plot, the module tree and a virtual table: only the visible rows exist in the DOM, cells
// are read per row from the columnar data, whole-column arrays are built only for filters and sorts.
// Every piece of data reaches the page through textContent or canvas text, never as markup.
'use strict';
(function () {
  const K_FLOAT = 0, K_INT = 1, K_PCT = 2, K_STR = 3;
  const STATE_NAMES = ['ok', 'origin', 'propagated', 'unknown', 'noise', 'suspect', 'one-sided'];
  const COLOUR_NAMES = ['none', 'yellow', 'red'];
  const SEVERITY = [1, 5, 3, 0, 2, 4, 0]; // by state code: origin > suspect > propagated > noise > ok > unknown, one-sided
  const MAX_SCROLL_PX = 8e6; // browsers cap element heights; larger tables scroll proportionally
  const TREE_CHUNK = 200;
  const TYPES = { i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array, i4: Int32Array, u4: Uint32Array,
    f4: Float32Array, f8: Float64Array };
  const $ = (id) => document.getElementById(id);
  const timings = {};
  window.__reportTimings = timings;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // ---- numbers as Python prints them (repr), so cells read as in the csv/jsonl files ----
  function pyRepr(x) {
    if (x !== x) return 'nan';
    if (x === Infinity) return 'inf';
    if (x === -Infinity) return '-inf';
    if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
    const e = x.toExponential(); // shortest round-trip digits
    const at = e.indexOf('e');
    const exp = parseInt(e.slice(at + 1), 10);
    const neg = e[0] === '-';
    const digits = e.slice(neg ? 1 : 0, at).replace('.', '');
    const sign = neg ? '-' : '';
    if (exp < -4 || exp >= 16) {
      const mant = digits.length > 1 ? digits[0] + '.' + digits.slice(1) : digits;
      const ae = Math.abs(exp);
      return sign + mant + 'e' + (exp < 0 ? '-' : '+') + (ae < 10 ? '0' + ae : String(ae));
    }
    if (exp >= 0) {
      const whole = digits.length > exp + 1 ? digits.slice(0, exp + 1) : digits + '0'.repeat(exp + 1 - digits.length);
      const frac = digits.length > exp + 1 ? digits.slice(exp + 1) : '0';
      return sign + whole + '.' + frac;
    }
    return sign + '0.' + '0'.repeat(-exp - 1) + digits;
  }

  function fmtScore(x) {
    if (x === null || x === undefined) return 'n/a';
    if (typeof x === 'string') return x;
    if (x !== x) return 'n/a';
    return Math.abs(x) >= 1e-3 && Math.abs(x) < 1e6 || x === 0 ? String(+x.toPrecision(6)) : x.toExponential(3);
  }

  function textNumber(s) {
    const t = s.trim();
    if (t === 'inf' || t === 'inf\t') return Infinity;
    if (t === '-inf') return -Infinity;
    if (t === '' || t === 'nan') return NaN;
    const v = Number(t.endsWith('%') ? t.slice(0, -1) : t);
    return v;
  }

  // ---- payload ----
  function base64Bytes(text) {
    if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(text);
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  async function inflate(bytes) {
    if (typeof DecompressionStream !== 'function') throw new Error('this browser cannot decompress the report data (no DecompressionStream); use a current Chrome, Edge, Firefox or Safari');
    const ds = new DecompressionStream('deflate');
    const writer = ds.writable.getWriter();
    writer.write(bytes).catch(() => {}); // errors surface through the reader
    writer.close().catch(() => {});
    const reader = ds.readable.getReader();
    const chunks = [];
    let total = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      total += value.length;
    }
    const out = new Uint8Array(total);
    let at = 0;
    for (const c of chunks) { out.set(c, at); at += c.length; }
    return out;
  }

  function parsePayload(bytes) {
    const size = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
    const meta = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + size)));
    let base = 4 + size;
    base += (8 - base % 8) % 8;
    const buf = (ref) => new TYPES[ref.t](bytes.buffer, bytes.byteOffset + base + ref.o, ref.n);
    return { meta, buf };
  }

  function prefixSum(codes) {
    const out = new Int32Array(codes.length);
    let acc = 0;
    for (let i = 0; i < codes.length; i++) { acc += codes[i]; out[i] = acc; }
    return out;
  }

  function decodeStrings(d, buf) {
    if (!d.b) return d.s;
    const text = new TextDecoder().decode(buf(d.b)), ends = buf(d.e), out = new Array(ends.length);
    let start = 0;
    for (let i = 0; i < ends.length; i++) { const end = ends[i]; out[i] = text.substring(start, end); start = end; }
    return out;
  }

  function find(sorted, i) { // index of i in an ascending typed array, or -1
    let lo = 0, hi = sorted.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1, v = sorted[mid];
      if (v === i) return mid;
      if (v < i) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
  }

  // Codes as stored: a typed array, or one common code plus exceptions (read per cell, expanded on demand).
  function storedCodes(ref, buf) {
    if (ref.a) { const a = buf(ref.a); return { at: (i) => a[i], all: () => a, sums: null }; }
    const n = ref.n, fill = ref.fill || 0;
    const at = ref.at ? buf(ref.at) : new Uint32Array(0), v = ref.at ? buf(ref.v) : new Uint8Array(0);
    return {
      at: (i) => { const j = find(at, i); return j < 0 ? fill : v[j]; },
      all: () => { const out = new Int32Array(n); if (fill) out.fill(fill); for (let j = 0; j < at.length; j++) out[at[j]] = v[j]; return out; },
      sums: () => { // running sums of the codes, per cell: fill * (i + 1) plus what the exceptions add up to i
        const extra = new Float64Array(at.length);
        let acc = 0;
        for (let j = 0; j < at.length; j++) { acc += v[j] - fill; extra[j] = acc; }
        return (i) => { const j = countUpTo(at, i); return fill * (i + 1) + (j ? extra[j - 1] : 0); };
      },
    };
  }

  function countUpTo(sorted, i) { // how many values of an ascending typed array are <= i
    let lo = 0, hi = sorted.length;
    while (lo < hi) { const mid = (lo + hi) >>> 1; if (sorted[mid] <= i) lo = mid + 1; else hi = mid; }
    return lo;
  }

  // A table column. Codes and numbers are read per cell for the visible rows; whole-column arrays
  // (filter, sort) are built on first use, so opening a large report allocates little.
  function makeColumn(c, k, meta, dicts, buf, cols) {
    const col = { name: c.name, dict: dicts[c.dict], dictId: c.dict, hasNum: !!c.num, numeric: false, index: k };
    const stored = storedCodes(c.codes, buf);
    let codes = null, values = null;
    if (c.delta) {
      if (stored.sums) col.code = stored.sums();
      else { codes = prefixSum(stored.all()); col.code = (i) => codes[i]; }
    } else if (c.ref !== undefined) {
      const base = cols[c.ref];
      col.code = (i) => stored.at(i) + base.code(i);
    } else col.code = stored.at;
    col.codes = () => {
      if (!codes) {
        if (c.delta || c.ref !== undefined) {
          const n = meta.n, out = new Int32Array(n);
          if (c.ref !== undefined) { const own = stored.all(), base = cols[c.ref].codes(); for (let i = 0; i < n; i++) out[i] = own[i] + base[i]; }
          else for (let i = 0; i < n; i++) out[i] = col.code(i);
          codes = out;
        } else codes = stored.all();
      }
      return codes;
    };
    const num = c.num;
    if (!num) return col;
    const xi = num.xi ? buf(num.xi) : null, xv = num.xi ? buf(num.xv) : null;
    let base;
    if (num.d) { // recomputed from two other columns, in float64 as numpy did
      const a = () => cols[num.a], b = () => cols[num.b];
      base = num.d === 'sub' ? (i) => a().value(i) - b().value(i) : (i) => Math.abs(a().value(i) / b().value(i) * 100);
      col.values = () => {
        if (!values) {
          const A = a().values(), B = b().values(), n = A.length, v = new Float64Array(n);
          if (num.d === 'sub') for (let i = 0; i < n; i++) v[i] = A[i] - B[i];
          else for (let i = 0; i < n; i++) v[i] = Math.abs(A[i] / B[i] * 100);
          for (let j = 0; j < xi.length; j++) v[xi[j]] = xv[j];
          values = v;
        }
        return values;
      };
    } else {
      const v = buf(num.v);
      base = (i) => v[i];
      col.values = () => {
        if (!values) {
          if (!xi) values = v;
          else { values = new Float64Array(v); for (let j = 0; j < xi.length; j++) values[xi[j]] = xv[j]; }
        }
        return values;
      };
    }
    col.value = xi ? (i) => { const j = find(xi, i); return j < 0 ? base(i) : xv[j]; } : base;
    return col;
  }

  function decodeColumns(meta, buf) {
    const dicts = meta.dicts.map((d) => decodeStrings(d, buf));
    timings.strings = performance.now();
    const cols = [];
    meta.columns.forEach((c, k) => cols.push(makeColumn(c, k, meta, dicts, buf, cols)));
    return cols;
  }

  function cellText(col, i) {
    const k = col.code(i);
    if (k >= K_STR) return col.dict[k - K_STR];
    const v = col.value(i);
    if (k === K_INT) return String(v);
    return k === K_PCT ? pyRepr(v) + '%' : pyRepr(v);
  }

  // A number as shown in a cell: 6 significant digits (trailing zeros dropped), exponent form when tiny or huge;
  // the cell's title keeps the full value (cellText).
  function shortNumber(v) {
    if (v !== v || v === Infinity || v === -Infinity || v === 0) return pyRepr(v);
    const a = Math.abs(v);
    if (a >= 1e-4 && a < 1e6) {
      const t = v.toPrecision(6);
      return t.indexOf('.') >= 0 ? t.replace(/0+$/, '').replace(/\.$/, '.0') : t;
    }
    const e = v.toExponential(5).replace(/\.?0+e/, 'e');
    return e.replace(/e([+-])(\d)$/, 'e$10$2');
  }

  function shownText(col, i) {
    const k = col.code(i);
    if (k >= K_STR) {
      const s = col.dict[k - K_STR];
      return col.stack && s !== 'N/A' ? stackHead(s) : s;
    }
    const v = col.value(i);
    if (k === K_INT) return String(v);
    return k === K_PCT ? shortNumber(v) + '%' : shortNumber(v);
  }

  // ---- stacks: "File f, line n, in func, \n code" lines (a list, or its Python text in a cell) as frames ----
  const FRAME = /File ([^\n]+?), line (\d+), in ([^,\n]+?)(?:,|$)\s*(?:\\n|\n)?\s*([^\n]*?)\s*(?=['"](?:, ['"]|\]$)|$)/;
  const LIBRARY = /[\\/](?:site-packages|dist-packages)[\\/]|[\\/](?:torch|msprobe|mindspore|torch_npu)[\\/]|^<frozen /;

  function frameList(lines) { // frames in stack order, each {file, line, func, code, user}
    const out = [];
    for (const text of lines) {
      const m = FRAME.exec(text);
      if (!m) continue;
      const code = m[4].replace(/\\'/g, "'").replace(/['"]\]?$/, '').trim();
      out.push({ file: m[1], line: m[2], func: m[3], code, user: !LIBRARY.test(m[1]) });
    }
    return out;
  }

  function cellFrames(text) { // the frames of a stack cell (Python's text of a list of strings)
    const parts = text.split(/['"], ['"](?=File )/);
    return frameList(parts);
  }

  function userFirst(frames) { // the user's own frames first (innermost first, as dumped), then the library's
    return frames.filter((f) => f.user).concat(frames.filter((f) => !f.user));
  }

  function frameText(f) {
    return f.file + ':' + f.line + ' ' + f.func;
  }

  function stackHead(text) { // a stack cell in the table: the user's innermost frame
    const frames = userFirst(cellFrames(text));
    return frames.length ? frameText(frames[0]) + (frames.length > 1 ? ' (+' + (frames.length - 1) + ')' : '') : text;
  }

  function stackBox(frames) { // frames as a list: file:line function, the code below
    const ol = el('ol', 'frames');
    for (const f of userFirst(frames)) {
      const li = el('li', f.user ? 'user' : 'lib');
      li.append(el('span', 'where', frameText(f)));
      if (f.code) li.append(el('code', null, f.code));
      ol.append(li);
    }
    return ol;
  }

  // ---- state ----
  const R = {};

  async function load() {
    const node = $('payload');
    let bytes = base64Bytes(node.textContent);
    timings.base64 = performance.now();
    if (node.dataset.encoding === 'zlib') bytes = await inflate(bytes);
    timings.inflate = performance.now();
    const { meta, buf } = parsePayload(bytes);
    timings.parse = performance.now();
    R.meta = meta;
    R.n = meta.n;
    R.cols = decodeColumns(meta, buf);
    R.colour = storedCodes(meta.colour, buf).all();
    R.rowIndex = meta.partial ? buf(meta.partial.rows) : null; // a large table: the table row of each page row
    R.rowEntry = prefixSum(storedCodes(meta.entry, buf).all());
    const rc = meta.rootcause;
    if (rc) {
      R.rc = rc;
      rc.entries = decodeStrings(rc.entries, buf);
      R.states = buf(rc.states);
      R.out = buf(rc.out);
      R.inScores = buf(rc.in);
      R.floor = rc.floor ? buf(rc.floor) : null;
      R.parent = buf(rc.parent);
    }
    R.nameCol = Math.max(0, R.cols.findIndex((c) => c.name === 'NPU Name'));
    R.cols.forEach((c) => { c.stack = /_Stack_Info$/.test(c.name); });
    R.cols.forEach((c) => { c.numeric = isNumericColumn(c); });
    timings.decode = performance.now();
  }

  function isNumericColumn(col) {
    if (!col.hasNum) return false;
    const n = Math.min(R.n, 2000);
    let nums = 0, texts = 0;
    for (let i = 0; i < n; i++) {
      const k = col.code(i);
      if (k < K_STR) nums++;
      else if (col.dict[k - K_STR] !== 'N/A') texts++;
    }
    return nums >= texts;
  }

  function rowState(row) {
    return R.states ? R.states[R.rowEntry[row]] : 3;
  }

  function entryName(k) {
    const rc = R.rc;
    return k < rc.entries.length ? rc.entries[k] : rc.extra[k - rc.entries.length];
  }

  // ---- summary ----
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
        if (state >= 0 && (st ? st[ent[i]] : 3) !== state) continue;
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
    return TR.origins[k] ? 1 : TR.propagated[k] ? 2 : 3;
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

  // ---- plot ----
  function suspectCard(x, first) {
    const subtitle = first ? 'Suspect: above the noise floor by less than the precision can support' : '';
    return callCard('origin-card suspect', 'suspect', x.phase, subtitle, x.description, x.pos, (row) => {
      row('call', x.entry);
      row('evidence', x.evidence.text);
      row('to decide', x.advice);
    });
  }

  const P = { selected: -1, buckets: null, lo: 0, hi: 0, drag: null, firstBack: -1, ord: null, at: null };

  // The plot's x axis: the calls in execution order, as dumped, except that a module's parameter gradients
  // ("X.parameters_grad", dumped where the module's forward ran) stand right after X's last backward call, where
  // they are computed. ord[j]: the call at place j; at[k]: the place of call k.
  function plotOrder(entries) {
    const E = entries.length, lastBack = new Map();
    let grads = 0;
    for (let k = 0; k < E; k++) {
      const name = entries[k];
      const b = name.lastIndexOf('.backward.');
      if (b > 0 && /^\d+$/.test(name.slice(b + 10))) lastBack.set(name.slice(0, b), k);
      else if (name.endsWith('.parameters_grad')) grads++;
    }
    const ord = new Uint32Array(E), at = new Uint32Array(E);
    for (let k = 0; k < E; k++) ord[k] = k;
    if (grads && lastBack.size) {
      const key = new Float64Array(E);
      for (let k = 0; k < E; k++) {
        key[k] = k;
        const name = entries[k];
        if (!name.endsWith('.parameters_grad')) continue;
        const back = lastBack.get(name.slice(0, -'.parameters_grad'.length));
        if (back !== undefined && back > k) key[k] = back + 0.5 + k / (2 * E); // after it, in dump order
      }
      ord.sort((a, b) => key[a] - key[b]);
    }
    for (let j = 0; j < E; j++) at[ord[j]] = j;
    return { ord, at };
  }
  const STATE_COLOURS = ['#2e7d32', '#c62828', '#ef6c00', '#9e9e9e', '#8bc34a', '#8e24aa', '#5c6bc0'];

  function plotRange(out) {
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < out.length; i++) {
      const v = out[i];
      if (v > 0 && v < Infinity) { if (v < lo) lo = v; if (v > hi) hi = v; }
    }
    const t = typeof R.rc.threshold === 'number' ? R.rc.threshold : null;
    if (t && t > 0) { lo = Math.min(lo, t); hi = Math.max(hi, t); }
    if (lo === Infinity) { lo = 1e-6; hi = 1; }
    let a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
    a = Math.max(a, b - 16);
    if (b <= a) b = a + 1;
    return [a, b];
  }

  function drawPlot() {
    if (!R.rc) return;
    const canvas = $('plot');
    const W = canvas.clientWidth, H = canvas.clientHeight;
    if (!W || !H) return;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    const out = R.out, E = out.length, ord = P.ord, at = P.at;
    const L = 62, Rm = 12, Tm = 18, B = 30;
    const pw = Math.max(10, W - L - Rm), ph = Math.max(10, H - Tm - B);
    const [a, b] = P.range || (P.range = plotRange(out));
    const lo = P.lo, hi = Math.max(P.lo + 1, P.hi); // calls shown: lo..hi
    const band = 10; // rows for 0 (bottom) and inf (top)
    const yOf = (v) => {
      if (v <= 0) return Tm + ph;
      if (v === Infinity) return Tm;
      const l = Math.min(b, Math.max(a, Math.log10(v)));
      return Tm + band + (ph - 2 * band) * (1 - (l - a) / (b - a));
    };
    const xOf = (k) => L + (k - lo) / (hi - lo) * pw;
    Object.assign(P, { L, pw, xOf });
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = '#5f6b7a'; g.strokeStyle = '#e3e7ee'; g.lineWidth = 1;
    g.textAlign = 'right'; g.textBaseline = 'middle';
    const step = Math.max(1, Math.ceil((b - a) / 6));
    for (let e = a; e <= b; e += step) {
      const y = Math.round(yOf(Math.pow(10, e))) + 0.5;
      g.beginPath(); g.moveTo(L, y); g.lineTo(L + pw, y); g.stroke();
      g.fillText('1e' + e, L - 6, y);
    }
    g.fillText('0', L - 6, yOf(0)); g.fillText('inf', L - 6, yOf(Infinity));
    g.textBaseline = 'top';
    for (let j = 0; j <= 5 && E; j++) {
      const k = Math.round(lo + (hi - lo) * j / 5);
      g.textAlign = j === 0 ? 'left' : j === 5 ? 'right' : 'center';
      g.fillText(String(k), xOf(k), Tm + ph + 6);
    }
    g.textAlign = 'center';
    const zoomed = lo > 0 || hi < E - 1;
    g.fillText('call (execution order)' + (zoomed ? ' \u2014 zoomed, double-click to show all' : ' \u2014 drag to zoom'),
      L + pw / 2, Tm + ph + 17);
    g.save();
    g.beginPath(); g.rect(L, 0, pw, H); g.clip();
    if (P.firstBack > 0 && P.firstBack >= lo && P.firstBack <= hi) { // phase boundary: the first backward call
      const x = Math.round(xOf(P.firstBack)) + 0.5;
      g.strokeStyle = '#b7c0cc'; g.setLineDash([2, 3]);
      g.beginPath(); g.moveTo(x, Tm); g.lineTo(x, Tm + ph); g.stroke(); g.setLineDash([]);
      g.textAlign = 'left'; g.fillText('backward \u2192', x + 3, 2);
    }
    const t = typeof R.rc.threshold === 'number' ? R.rc.threshold : null;
    if (R.floor) { // the noise floor each call was compared with (solid) and the origin margin over it (dashed)
      const margin = typeof R.rc.margin === 'number' ? R.rc.margin : 0;
      const stepK = Math.max(1, Math.floor((hi - lo) / Math.max(1, pw)));
      for (const [scale, dash] of [[1, []], [margin, [5, 4]]]) {
        if (!(scale > 0)) continue;
        g.strokeStyle = '#607d8b'; g.setLineDash(dash); g.beginPath();
        let open = false;
        for (let k = Math.max(0, Math.floor(lo)); k <= Math.min(E - 1, Math.ceil(hi)); k += stepK) {
          const f = R.floor[ord[k]];
          if (!(f > 0)) { open = false; continue; }
          const x = xOf(k), y = yOf(f * scale);
          if (open) g.lineTo(x, y); else { g.moveTo(x, y); open = true; }
        }
        g.stroke(); g.setLineDash([]);
      }
    } else if (t !== null && t > 0) {
      const y = Math.round(yOf(t)) + 0.5;
      g.strokeStyle = '#555'; g.setLineDash([5, 4]);
      g.beginPath(); g.moveTo(L, y); g.lineTo(L + pw, y); g.stroke(); g.setLineDash([]);
    }
    // one bucket per pixel column: the worst call in it
    const nb = Math.max(1, Math.floor(pw));
    const best = new Int32Array(nb).fill(-1);
    const first = Math.max(0, Math.floor(lo)), last = Math.min(E - 1, Math.ceil(hi));
    for (let j = first; j <= last; j++) { // j: place on the axis; k: the call there
      const k = ord[j], v = out[k];
      if (v !== v) continue;
      const bk = Math.min(nb - 1, Math.max(0, Math.floor((j - lo) / (hi - lo) * (nb - 1) + 0.5)));
      const cur = best[bk];
      if (cur < 0 || v > out[cur] || (v === out[cur] && SEVERITY[R.states[k]] > SEVERITY[R.states[cur]])) best[bk] = k;
    }
    P.buckets = best; P.nb = nb;
    const size = nb >= (last - first + 1) * 4 ? 5 : 3;
    for (let order = 0; order < 6; order++) { // unknown, one-sided and ok first, origins on top
      for (let bk = 0; bk < nb; bk++) {
        const k = best[bk];
        if (k < 0 || SEVERITY[R.states[k]] !== order) continue;
        g.fillStyle = STATE_COLOURS[R.states[k]];
        g.fillRect(xOf(at[k]) - size / 2, yOf(out[k]) - size / 2, size, size);
      }
    }
    R.rc.origins.forEach((o, j) => {
      if (o.pos < 0 || o.pos >= E || at[o.pos] < lo || at[o.pos] > hi) return;
      const x = Math.round(xOf(at[o.pos])) + 0.5;
      g.strokeStyle = '#c62828'; g.lineWidth = j === 0 ? 2 : 1; g.globalAlpha = j === 0 ? 0.9 : 0.45;
      g.beginPath(); g.moveTo(x, Tm); g.lineTo(x, Tm + ph); g.stroke();
      g.globalAlpha = 1; g.lineWidth = 1;
      if (j < 9) { g.fillStyle = '#c62828'; g.textAlign = 'center'; g.textBaseline = 'bottom'; g.fillText(String(j + 1), x, Tm - 2); }
    });
    if (P.selected >= 0 && P.selected < E && at[P.selected] >= lo && at[P.selected] <= hi) {
      const x = xOf(at[P.selected]), v = out[P.selected];
      g.strokeStyle = '#1f5fbf'; g.lineWidth = 2;
      g.beginPath(); g.arc(x, v === v ? yOf(v) : Tm + ph, 6, 0, 2 * Math.PI); g.stroke(); g.lineWidth = 1;
    }
    g.restore();
    if (P.drag && P.drag.x1 !== undefined) {
      g.fillStyle = 'rgba(31, 95, 191, 0.15)';
      g.fillRect(Math.min(P.drag.x0, P.drag.x1), Tm, Math.abs(P.drag.x1 - P.drag.x0), ph);
    }
    g.strokeStyle = '#9aa4b2';
    g.strokeRect(L + 0.5, Tm + 0.5, pw, ph);
  }

  function plotX(ev) {
    return ev.clientX - $('plot').getBoundingClientRect().left;
  }

  function callAt(x) {
    return P.lo + (x - P.L) / P.pw * (Math.max(P.lo + 1, P.hi) - P.lo);
  }

  function plotHit(ev) {
    if (!P.buckets) return -1;
    const x = plotX(ev) - P.L;
    if (x < -4 || x > P.pw + 4) return -1;
    const center = Math.round(Math.max(0, Math.min(1, x / P.pw)) * (P.nb - 1));
    for (let d = 0; d <= 4; d++) {
      for (const bk of [center - d, center + d]) {
        if (bk >= 0 && bk < P.nb && P.buckets[bk] >= 0) return P.buckets[bk];
      }
    }
    return -1;
  }

  function showCall(k) { // zoom so that call k is visible, then mark it
    const E = R.out.length, j = P.at ? P.at[k] : k;
    if (j < P.lo || j > P.hi) { const w = P.hi - P.lo; P.lo = Math.max(0, Math.min(E - 1 - w, j - w / 2)); P.hi = P.lo + w; }
    P.selected = k;
    drawPlot();
  }

  function bindPlot() {
    const canvas = $('plot'), tip = $('plot-tip');
    P.lo = 0; P.hi = Math.max(1, R.out.length - 1);
    Object.assign(P, plotOrder(R.rc.entries.slice(0, R.out.length)));
    const back = R.rc.entries.findIndex((name) => /\.backward(\.|$)/.test(name));
    P.firstBack = back < 0 ? -1 : P.at[back];
    $('plot-card').hidden = false;
    $('plot-metric').textContent = 'worst output ' + (R.rc.metric || 'metric') + ' per call (log scale)';
    canvas.addEventListener('mousedown', (ev) => { if (ev.button === 0) P.drag = { x0: plotX(ev) }; });
    canvas.addEventListener('mousemove', (ev) => {
      if (P.drag) { P.drag.x1 = plotX(ev); drawPlot(); }
      const k = plotHit(ev);
      if (k < 0) { tip.hidden = true; return; }
      tip.hidden = false;
      tip.textContent = '#' + P.at[k] + ' ' + entryName(k) + '\n' + STATE_NAMES[R.states[k]] + ', outputs ' + fmtScore(R.out[k]) +
        ', inputs ' + fmtScore(R.inScores[k]);
      const rect = canvas.getBoundingClientRect();
      tip.style.left = Math.min(plotX(ev) + 12, Math.max(0, rect.width - 360)) + 'px';
      tip.style.top = (ev.clientY - rect.top + 14) + 'px';
    });
    canvas.addEventListener('mouseleave', () => { tip.hidden = true; if (P.drag) { P.drag = null; drawPlot(); } });
    canvas.addEventListener('mouseup', (ev) => {
      const drag = P.drag;
      P.drag = null;
      if (drag && drag.x1 !== undefined && Math.abs(drag.x1 - drag.x0) > 5) {
        const a = callAt(Math.min(drag.x0, drag.x1)), b = callAt(Math.max(drag.x0, drag.x1));
        P.lo = Math.max(0, Math.floor(a)); P.hi = Math.min(R.out.length - 1, Math.max(P.lo + 1, Math.ceil(b)));
        drawPlot();
        return;
      }
      const k = plotHit(ev);
      if (k >= 0) selectCall(k, true); else drawPlot();
    });
    canvas.addEventListener('dblclick', () => { P.lo = 0; P.hi = Math.max(1, R.out.length - 1); drawPlot(); });
    let timer = 0;
    window.addEventListener('resize', () => { clearTimeout(timer); timer = setTimeout(drawPlot, 100); });
    drawPlot();
  }

  // ---- start ----
  async function start() {
    try {
      await load();
      buildSummary();
      $('loading').hidden = true;
      $('app').hidden = false;
      buildTable();
      bindFilters();
      applyView();
      window.__report = { rows: R.n, columns: R.cols.map((c) => c.name), cell: (row, col) => cellText(R.cols[col], row),
        shown: (row, col) => shownText(R.cols[col], row),
        matching: () => V.view.length, plotX: (k) => (P.xOf ? P.xOf(P.at[k]) : -1), plotRange: () => [P.lo, P.hi],
        calls: () => (R.rc ? R.rc.entries.slice(0, R.out.length) : []),
        shownColumns: () => Array.from(T.shown) };
      window.__reportReady = performance.now();
      timings.ready = window.__reportReady;
      if (R.rc) {
        setTimeout(() => {
          bindPlot();
          buildTree();
          window.__reportComplete = performance.now();
          warmNameFilter();
        }, 0);
      } else {
        window.__reportComplete = performance.now();
        warmNameFilter();
      }
    } catch (err) {
      const box = $('loading');
      box.hidden = false;
      box.className = 'error';
      box.textContent = 'The report could not be shown: ' + (err && err.message ? err.message : String(err));
      window.__reportError = String(err && err.stack ? err.stack : err);
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
