from msprobe_compare.cli import main

raise SystemExit(main())
