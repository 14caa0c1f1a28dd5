"""NanoGPT (GPT-2 style) trained the TTML way on a ttjax mesh: DDP, TP, TP+DDP."""
