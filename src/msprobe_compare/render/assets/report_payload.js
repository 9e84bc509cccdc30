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
