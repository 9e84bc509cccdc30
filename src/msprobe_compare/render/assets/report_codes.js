  // msprobe compare report: decodes the embedded payload (format: render/html.py) and builds the summary,
  // the metric plot, the module tree and a virtual table: only the visible rows exist in the DOM, cells
  // are read per row from the columnar data, whole-column arrays are built only for filters and sorts.
  // Every piece of data reaches the page through textContent or canvas text, never as markup.
  // The page's script is the parts named in render/report_script.py (PARTS), joined in this order inside one
  // function; this part holds the codes the payload and the pages share with Python (checked against them when
  // the script is first read: CellKind, the call states of report_script.STATE_CODE, Colour) and the helpers of every part.
  const K_FLOAT = 0, K_INT = 1, K_PCT = 2, K_STR = 3;
  const ST_OK = 0, ST_ORIGIN = 1, ST_PROPAGATED = 2, ST_UNKNOWN = 3, ST_NOISE = 4, ST_SUSPECT = 5, ST_ONE_SIDED = 6;
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
