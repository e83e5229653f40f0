"""Inter-process links (shared-memory rings); nothing else in the server imports this yet."""
