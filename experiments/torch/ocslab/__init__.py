"""ocslab's Python side: the PyTorch backend over the phase shim.

`import ocslab.torch_backend` registers the torch.distributed backend "ocslab"
(docs/workloads.md, "Your own PyTorch job"). This package itself imports nothing heavy, so the
pure-Python parts (ocslab.groups) work without torch and without the C++ module.
"""
