"""Benchmark graph: EfficientNetB0 inference (keras.applications, weights=None).

The issue's "EfficientNetB0 inference": about 1.7k nodes at TF's clustering input.
"""
import numpy as np
import tensorflow as tf
import keras

np.random.seed(0)
tf.random.set_seed(0)
keras.utils.set_random_seed(0)

model = keras.applications.EfficientNetB0(weights=None, input_shape=(64, 64, 3), classes=1000)
x = tf.constant(np.random.rand(2, 64, 64, 3).astype(np.float32))


@tf.function(input_signature=[tf.TensorSpec([2, 64, 64, 3], tf.float32)])
def predict(x):
    return model(x, training=False)


print(predict(x).numpy().argmax(axis=-1))
