"""gluon.nn — the layers: Dense, Conv2D, MaxPool2D, AvgPool2D, Flatten,
Activation, BatchNorm, Dropout, Sequential, HybridSequential.

Each is a HybridBlock whose hybrid_forward calls the registered ops by
their MXNet names (FullyConnected, Convolution, Pooling, ...) through F, so
the same code runs imperatively (mx.nd) and traced (mx.sym).  Unknown
input sizes (in_units=0, in_channels=0) are deferred until the first
forward (block.py).  Parameter initializers default as MXNet's Gluon:
weights from the initialize() call's initializer, biases zero, BatchNorm's
gamma/var one and beta/mean zero.
"""
from .. import initializer as init_mod
from .block import Block, HybridBlock


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class Sequential(Block):
    def __init__(self, prefix=None, params=None):
        super().__init__(prefix, params)
        self._layers = []

    def add(self, *blocks):
        for b in blocks:
            self._layers.append(b)
            self.register_child(b)

    def forward(self, x):
        for b in self._layers:
            x = b(x)
        return x

    def __getitem__(self, i):
        return self._layers[i]

    def __len__(self):
        return len(self._layers)


class HybridSequential(HybridBlock):
    def __init__(self, prefix=None, params=None):
        super().__init__(prefix, params)
        self._layers = []

    def add(self, *blocks):
        for b in blocks:
            if not isinstance(b, HybridBlock):
                raise TypeError("HybridSequential holds HybridBlocks, got %s" % type(b).__name__)
            self._layers.append(b)
            self.register_child(b)

    def forward(self, x):
        for b in self._layers:
            x = b(x)
        return x

    def hybrid_forward(self, F, x):
        for b in self._layers:
            x = b(x)
        return x

    def __getitem__(self, i):
        return self._layers[i]

    def __len__(self):
        return len(self._layers)


class Dense(HybridBlock):
    def __init__(self, units, activation=None, use_bias=True, flatten=True, dtype="float32",
                 weight_initializer=None, bias_initializer="zeros", in_units=0, prefix=None, params=None):
        super().__init__(prefix, params)
        self._units, self._flatten, self._act, self._use_bias = units, flatten, activation, use_bias
        self.weight = self.params.get("weight", shape=(units, in_units), init=weight_initializer, dtype=dtype,
                                      allow_deferred_init=True)
        self.bias = self.params.get("bias", shape=(units,), init=_init(bias_initializer), dtype=dtype) \
            if use_bias else None

    def hybrid_forward(self, F, x, weight, bias=None):
        kw = {"bias": bias} if bias is not None else {"no_bias": True}
        out = F.FullyConnected(x, weight=weight, num_hidden=self._units, flatten=self._flatten,
                               name=self.prefix + "fwd", **kw)
        if self._act:
            out = F.Activation(out, act_type=self._act, name=self.prefix + self._act)
        return out


class Conv2D(HybridBlock):
    def __init__(self, channels, kernel_size, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                 layout="NCHW", activation=None, use_bias=True, weight_initializer=None, bias_initializer="zeros",
                 in_channels=0, prefix=None, params=None):
        super().__init__(prefix, params)
        if layout != "NCHW":
            raise ValueError("Conv2D: only layout NCHW is implemented")
        k = _pair(kernel_size)
        self._kw = {"kernel": k, "stride": _pair(strides), "pad": _pair(padding), "dilate": _pair(dilation),
                    "num_filter": channels, "num_group": groups}
        self._act = activation
        self.weight = self.params.get("weight", shape=(channels, in_channels // groups if in_channels else 0) + k,
                                      init=weight_initializer, allow_deferred_init=True)
        self.bias = self.params.get("bias", shape=(channels,), init=_init(bias_initializer)) if use_bias else None

    def _alias(self):
        return "conv"

    def hybrid_forward(self, F, x, weight, bias=None):
        kw = {"bias": bias} if bias is not None else {"no_bias": True}
        out = F.Convolution(x, weight=weight, name=self.prefix + "fwd", **self._kw, **kw)
        if self._act:
            out = F.Activation(out, act_type=self._act, name=self.prefix + self._act)
        return out


class _Pool(HybridBlock):
    _type = None

    def __init__(self, pool_size=(2, 2), strides=None, padding=(0, 0), ceil_mode=False, global_pool=False,
                 count_include_pad=True, prefix=None, params=None):
        super().__init__(prefix, params)
        self._kw = {"kernel": _pair(pool_size), "stride": _pair(strides if strides is not None else pool_size),
                    "pad": _pair(padding), "pool_type": self._type, "global_pool": global_pool,
                    "pooling_convention": "full" if ceil_mode else "valid"}
        if self._type == "avg" and not count_include_pad:
            self._kw["count_include_pad"] = False

    def _alias(self):
        return "pool"

    def hybrid_forward(self, F, x):
        return F.Pooling(x, name=self.prefix + "fwd", **self._kw)


class MaxPool2D(_Pool):
    _type = "max"


class AvgPool2D(_Pool):
    _type = "avg"


class Flatten(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.Flatten(x, name=self.prefix + "fwd")


class Activation(HybridBlock):
    def __init__(self, activation, prefix=None, params=None):
        self._act_type = activation
        super().__init__(prefix, params)

    def _alias(self):
        return self._act_type

    def hybrid_forward(self, F, x):
        return F.Activation(x, act_type=self._act_type, name=self.prefix + "fwd")


class Dropout(HybridBlock):
    def __init__(self, rate, axes=(), prefix=None, params=None):
        super().__init__(prefix, params)
        if axes:
            raise ValueError("Dropout: axes is not implemented")
        self._rate = rate

    def hybrid_forward(self, F, x):
        return F.Dropout(x, p=self._rate, name=self.prefix + "fwd")


class BatchNorm(HybridBlock):
    def __init__(self, axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True, use_global_stats=False,
                 beta_initializer="zeros", gamma_initializer="ones", running_mean_initializer="zeros",
                 running_variance_initializer="ones", in_channels=0, prefix=None, params=None):
        super().__init__(prefix, params)
        self._kw = {"axis": axis, "momentum": momentum, "eps": epsilon, "fix_gamma": not scale,
                    "use_global_stats": use_global_stats}
        self.gamma = self.params.get("gamma", grad_req="write" if scale else "null", shape=(in_channels,),
                                     init=_init(gamma_initializer), allow_deferred_init=True)
        self.beta = self.params.get("beta", grad_req="write" if center else "null", shape=(in_channels,),
                                    init=_init(beta_initializer), allow_deferred_init=True)
        self.running_mean = self.params.get("running_mean", grad_req="null", shape=(in_channels,),
                                            init=_init(running_mean_initializer), allow_deferred_init=True)
        self.running_var = self.params.get("running_var", grad_req="null", shape=(in_channels,),
                                           init=_init(running_variance_initializer), allow_deferred_init=True)

    def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
        return F.BatchNorm(x, gamma=gamma, beta=beta, moving_mean=running_mean, moving_var=running_var,
                           name=self.prefix + "fwd", **self._kw)


def _init(v):
    if v is None:
        return None
    if isinstance(v, str):
        return {"zeros": init_mod.Zero(), "ones": init_mod.One()}.get(v) or init_mod.create(v)
    return v
