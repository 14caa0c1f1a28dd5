"""TT-NN on the core: per-device ops, CCL collectives, host conversion, trace, conv, TT-NN's
namespace modules (``experimental``, ``transformer``, ``kv_cache``). Imports the core only."""
