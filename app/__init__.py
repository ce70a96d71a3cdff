"""nexttoken's Qt window: panels over a worker thread that owns the engine session."""
