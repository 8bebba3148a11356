"""Stream pause patterns (placeholder until the verification layer lands)."""

PATTERNS = ("none", "cycle", "random", "bursty")
