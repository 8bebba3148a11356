"""The demo engine's generator side: its registration (:mod:`.engine`) and its benchmark
(:mod:`.bench`, the tool's own speed on the smallest engine)."""
