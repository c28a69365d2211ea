"""Benchmark graph: one ResNet-50 training step (keras.applications, weights=None).

64x64x3 input, 10 classes, batch 2, Keras Adam, all in one tf.function with Grappler on.
TF's ``before_mark_for_compilation`` dump has 12,620 nodes (9,888 before constant cloning):
the issue's "ResNet-50 training step" (the same graph as the fixture run resnet50_train_adam,
whose input is 32x32; the spatial size does not change the graph). Run by ``benchmarks/run.py --prepare`` under
``jitsim.tfprocess.harvest`` (TF's dump flags and pass-time logging).
"""
import numpy as np
import tensorflow as tf
import keras

np.random.seed(0)
tf.random.set_seed(0)
keras.utils.set_random_seed(0)

SIZE = 64  # spatial size does not change the graph's node count; small keeps TF's run short
model = keras.applications.ResNet50(weights=None, input_shape=(SIZE, SIZE, 3), classes=10)
opt = keras.optimizers.Adam(learning_rate=1e-3)
opt.build(model.trainable_variables)
loss_fn = keras.losses.SparseCategoricalCrossentropy()

x = tf.constant(np.random.rand(2, SIZE, SIZE, 3).astype(np.float32))
y = tf.constant(np.random.randint(0, 10, size=(2,)).astype(np.int64))


@tf.function(input_signature=[tf.TensorSpec([2, SIZE, SIZE, 3], tf.float32), tf.TensorSpec([2], tf.int64)])
def train_step(x, y):
    with tf.GradientTape() as tape:
        probs = model(x, training=True)
        loss = loss_fn(y, probs)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


print("loss", float(train_step(x, y)))
