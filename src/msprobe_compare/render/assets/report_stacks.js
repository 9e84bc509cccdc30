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
