"""gluon — a thin Gluon: Parameter, Block/HybridBlock, nn layers, losses,
Trainer (see docs/python.md for what is implemented)."""
from .parameter import Parameter, ParameterDict, DeferredInitializationError
from .block import Block, HybridBlock, SymbolBlock
from . import nn
from . import loss
from .trainer import Trainer
