"""ReAct Lab views: everything a person sees. No arithmetic on probabilities here."""
