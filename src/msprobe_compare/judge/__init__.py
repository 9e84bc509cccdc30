"""judge: numbers -> verdicts (Result, accuracy, colours, advice)."""
