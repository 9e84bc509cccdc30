"""measure: pairs -> numbers (statistics diffs, md5, tensor metrics)."""
