"""The demo engine's studies: the foundation benchmark (:mod:`.bench`, the engine's
``bench`` hook), the tool's own speed on the demo engine."""
