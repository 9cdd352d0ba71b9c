"""The in-context LLM planner (`planner.py`) with its backends (local transformers or an
OpenAI-compatible server), answer parser, prompt builder, episodic memory, model files
(`models.py`) and a small OpenAI-compatible server for a local model (`serve.py`)."""
