"""contrib — mx.contrib: where MXNet 1.x keeps amp (mx.contrib.amp is mx.amp)."""
from .. import amp
