"""pair: match NPU rows with bench rows (exact, fuzzy, mappings)."""
