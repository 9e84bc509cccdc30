"""load: dump folders, dump.json, stack.json, construct.json and tensor files -> rows."""
