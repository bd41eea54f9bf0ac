"""ReAct Lab runtime: the model, sampling, constraints and the agent loop. Never imports Gradio."""
