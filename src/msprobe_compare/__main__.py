from msprobe_compare.launch import msprobe_compare

raise SystemExit(msprobe_compare())
