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
