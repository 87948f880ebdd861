"""The program features basin's latency estimators read (docs/features.md).

A program is described store by store: for each buffer store, one vector of the features
named by names(), in that order, each as log2(1 + x). A batch of programs is an array
[programs, stores, features] padded to the largest store count, with a mask
[programs, stores] that is 1 for a real store.
"""

from . import _basin


def names(target="llvm"):
    """The features of one store, in order: the CPU's set ("llvm") or the GPU's ("cuda")."""
    return list(_basin.feature_names(target))
