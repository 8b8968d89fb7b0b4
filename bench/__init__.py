"""`make bench`: performance figures measured side by side, written to bench/results.json."""
