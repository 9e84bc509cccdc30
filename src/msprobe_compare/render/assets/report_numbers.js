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
