"""The XLA JIT tutorial's MNIST softmax training step, in TF2, on synthetic data.

A single-layer softmax regression ``y = x @ W + b`` trained with sparse softmax
cross-entropy and plain gradient descent (learning rate 0.5), as in TensorFlow's original
"Using JIT compilation" tutorial; the images and labels are random (seeded), so nothing is
downloaded. ``train_step`` is a ``tf.function``: with ``TF_XLA_FLAGS=--tf_xla_auto_jit=2
--tf_xla_cpu_global_jit`` TF auto-clusters its MatMul/Add/softmax/update ops into one XLA
launch.

    python mnist_softmax_xla.py            # trains a few hundred steps, prints the loss
    jitsim profile mnist_softmax_xla.py -o prof/   # runs jitsim_step() with XLA off and on

``jitsim profile`` imports this file (not as ``__main__``) and calls :func:`jitsim_step`.
"""

import numpy as np
import tensorflow as tf

BATCH, PIXELS, CLASSES = 100, 784, 10
LEARNING_RATE = 0.5

rng = np.random.default_rng(0)
images = tf.constant(rng.random((BATCH, PIXELS), dtype=np.float32))
labels = tf.constant(rng.integers(0, CLASSES, size=BATCH, dtype=np.int64))

W = tf.Variable(tf.zeros([PIXELS, CLASSES]), name="W")
b = tf.Variable(tf.zeros([CLASSES]), name="b")


@tf.function
def train_step(x, y_):
    with tf.GradientTape() as tape:
        y = tf.matmul(x, W) + b
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_, logits=y))
    dW, db = tape.gradient(loss, [W, b])
    W.assign_sub(LEARNING_RATE * dW)
    b.assign_sub(LEARNING_RATE * db)
    return loss


def jitsim_step():
    """One training step on the synthetic batch (what ``jitsim profile`` times)."""
    return train_step(images, labels)


if __name__ == "__main__":
    for step in range(300):
        loss = jitsim_step()
        if step % 100 == 0:
            print(f"step {step}: loss {float(loss):.4f}")
    print(f"final loss {float(loss):.4f}")
