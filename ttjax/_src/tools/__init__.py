"""Tools over TT-NN programs: HLO inspection, the step-time cost model, mesh pictures."""
