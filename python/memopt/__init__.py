"""memopt: train a PyTorch model within a byte budget of activation memory.

    import memopt
    model = memopt.optimize(model, ids, budget="60%", link="h100-sxm:pcie5")
    loss = model(input_ids=ids, labels=ids).loss   # the training loop as it was
    loss.backward()
    opt.step()

optimize() profiles the model's stages, solves for the fastest plan of keeping,
recomputing and offloading activations that fits the budget, and replays that plan in
every training step, dropout masks recomputed with the same randomness and autocast
as the forward ran it. It takes unmodified transformers causal LMs (GPT-2, Llama,
Mistral, Qwen, GPT-NeoX, Phi-3), any nn.Sequential, and any model that is a stack of
blocks (blocks=), on the CPU testbed or, when the package was built with the CUDA
backend, on a CUDA GPU (the model and the sample on one device). profile(), solve()
and simulate() read and write the JSON of the memopt command line.
"""
from ._api import (InfeasibleBudget, OptimizedModel, OptimizedSequential, Plan, ProblemTooLarge, optimize, profile,
                   simulate, solve, unoptimize)
from . import testbed

__all__ = ["optimize", "unoptimize", "profile", "solve", "simulate", "Plan", "OptimizedSequential", "OptimizedModel",
           "InfeasibleBudget", "ProblemTooLarge", "testbed"]
