"""Messages, the streaming protocol and model providers (layer 1)."""
