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
    return R.states ? R.states[R.rowEntry[row]] : ST_UNKNOWN;
  }

  function entryName(k) {
    const rc = R.rc;
    return k < rc.entries.length ? rc.entries[k] : rc.extra[k - rc.entries.length];
  }
