"""pi_notebook: a governed LLM agent for Jupyter."""
