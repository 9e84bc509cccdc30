"""render: verdicts -> files and console text (xlsx, csv, advisor)."""
