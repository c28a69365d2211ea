"""Ground truth for jitsim's BuildXlaOps tests (tests/test_build_xla_ops.py).

One cluster with every kind of input and output the pass treats differently: a
compile-time-constant argument (Reshape's shape packed from the int32 argument ``n``),
ordinary float and int32 arguments (``StringLength`` runs outside the cluster), a
resource argument (the variable read), a control input (from ``tf.print``), float and
int32 outputs, several data consumers and several control successors.

Harvested with real TF 2.21 by ``make.sh`` in this directory under several TF_XLA_FLAGS;
only the two dumps of the user function around BuildXlaOps are kept per flag set.
"""
import tensorflow as tf

v = tf.Variable(tf.ones([2, 3]), name="v")


@tf.function(input_signature=[tf.TensorSpec([6], tf.float32), tf.TensorSpec([], tf.int32),
                              tf.TensorSpec([], tf.string)])
def f(x, n, s):
    p = tf.print("start")
    k = tf.strings.length(s)
    with tf.control_dependencies([p]):
        shape = tf.stack([n, 3])
        y = tf.reshape(tf.exp(x) * 2.0 + 1.0, shape)
        z = tf.sin(y) * v.read_value() + tf.cast(k, tf.float32)
        cnt = tf.reduce_sum(tf.cast(y > 1.5, tf.int32)) + k
    u = tf.strings.as_string(z)
    w = tf.strings.as_string(cnt)
    with tf.control_dependencies([z, cnt]):
        q = tf.strings.join([s, "!"])
        r = tf.strings.upper(s)
    return u, w, q, r, z


print(f(tf.range(6, dtype=tf.float32), tf.constant(2), tf.constant("ab")))
