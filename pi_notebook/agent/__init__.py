"""The agent core (layer 2): tools, the loop, events and the Agent."""
