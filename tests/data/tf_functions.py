"""tf.functions for tests/test_tf_function.py: run as a program under real TF (harvest),
and imported to simulate each ConcreteFunction in-process with jitsim.cluster."""

import tensorflow as tf

v = tf.Variable(tf.ones([4, 4]))

@tf.function
def dense(x, w, b):
    return tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), b)) * 2.0 + tf.reduce_mean(x)

@tf.function
def strings(x):
    a = tf.sin(x) * tf.cos(x) + 1.0
    s = tf.strings.to_number(tf.strings.as_string(a))
    return tf.reduce_sum(s * a + tf.exp(x) - tf.tanh(x))

@tf.function
def with_var(x):
    v.assign_add(x)
    y = v.read_value() * 3.0 + x
    v.assign(y - 1.0)
    return tf.reduce_max(y * y + 1.0)

@tf.function
def branchy(x, p):
    y = tf.cond(p, lambda: tf.sin(x) * 2.0 + 1.0, lambda: tf.cos(x) - 1.0)
    return tf.abs(y) * tf.exp(y) - y

FUNCS = [
    (dense, (tf.TensorSpec([4, 4]), tf.TensorSpec([4, 4]), tf.TensorSpec([4]))),
    (strings, (tf.TensorSpec([4, 4]),)),
    (with_var, (tf.TensorSpec([4, 4]),)),
    (branchy, (tf.TensorSpec([4, 4]), tf.TensorSpec([], tf.bool))),
]

if __name__ == "__main__":
    x = tf.ones([4, 4])
    dense(x, x, tf.ones([4]))
    strings(x)
    with_var(x)
    branchy(x, tf.constant(True))
