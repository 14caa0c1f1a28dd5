"""Falcon-7B's MLP in TT-NN style (the TT-NN multi-device guide, sections 6 and 7)."""
