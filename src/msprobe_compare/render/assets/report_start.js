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
