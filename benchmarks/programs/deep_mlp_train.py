"""Benchmark graph: an unrolled deep MLP training step (raw variables, Adam update by hand).

``DEPTH`` dense layers (width 32, tanh) unrolled in Python inside one tf.function, forward,
backward and a hand-written Adam update per variable. DEPTH=517 gives 25,866 nodes (50 per layer + 16) at
TF's clustering input: the issue's "unrolled deep MLP training step". The env var
``JITSIM_BENCH_MLP_DEPTH`` overrides the depth.
"""
import os

import numpy as np
import tensorflow as tf

np.random.seed(0)
tf.random.set_seed(0)

DEPTH = int(os.environ.get("JITSIM_BENCH_MLP_DEPTH", "517"))
WIDTH = 32
params = []
for i in range(DEPTH):
    params.append(tf.Variable(np.random.randn(WIDTH, WIDTH).astype(np.float32) * 0.1, name=f"w{i}"))
    params.append(tf.Variable(np.zeros(WIDTH, np.float32), name=f"b{i}"))
ms = [tf.Variable(tf.zeros_like(p), name=f"m{i}") for i, p in enumerate(params)]
vs = [tf.Variable(tf.zeros_like(p), name=f"v{i}") for i, p in enumerate(params)]
x = tf.constant(np.random.randn(4, WIDTH).astype(np.float32))
y = tf.constant(np.random.randn(4, WIDTH).astype(np.float32))


@tf.function(input_signature=[tf.TensorSpec([4, WIDTH], tf.float32), tf.TensorSpec([4, WIDTH], tf.float32)])
def train_step(x, y):
    with tf.GradientTape() as tape:
        h = x
        for i in range(DEPTH):
            h = tf.tanh(tf.matmul(h, params[2 * i]) + params[2 * i + 1])
        loss = tf.reduce_mean(tf.square(h - y))
    grads = tape.gradient(loss, params)
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-7
    for p, g, m, v in zip(params, grads, ms, vs):
        m.assign(b1 * m + (1 - b1) * g)
        v.assign(b2 * v + (1 - b2) * g * g)
        p.assign_sub(lr * m / (tf.sqrt(v) + eps))
    return loss


print("loss", float(train_step(x, y)))
