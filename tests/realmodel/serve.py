"""``python -m llama_cpp.server`` with llama.cpp's extra CPU buffer types off (run by the real-model venv's python).

llama.cpp puts weights in "extra" buffer types where the CPU reports support: AMX tiles on Sapphire Rapids and
later, repacked layouts elsewhere. A virtual machine can report AMX in CPUID yet not enable its register
state, and the first batched matrix product then dies with SIGILL (``tilezero``), the server closing every
chat connection without a reply. With ``use_extra_bufts`` false the weights stay in the plain CPU buffer:
the same results, on any x86-64 host. ``EVALGATE_REALMODEL_EXTRA_BUFTS=1`` keeps llama.cpp's default.
"""

import os
import runpy

if os.environ.get("EVALGATE_REALMODEL_EXTRA_BUFTS") != "1":
    import llama_cpp.llama_cpp as native

    defaults = native.llama_model_default_params

    def _params():  # type: ignore[no-untyped-def]
        params = defaults()
        params.use_extra_bufts = False
        return params

    native.llama_model_default_params = _params

runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
