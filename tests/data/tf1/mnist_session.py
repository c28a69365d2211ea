"""The XLA tutorial's TF1 workflow: an MNIST softmax training step run in a tf.compat.v1.Session.

    python mnist_session.py OUT [--no-run]

writes OUT/graph.pbtxt (``tf.io.write_graph(sess.graph_def)``), OUT/model.meta (binary
MetaGraphDef, ``train_step`` in its ``train_op`` collection) and OUT/model.meta.pbtxt (text),
then runs ``sess.run(train_step, feed_dict=...)`` once on random data (the call the tests
compare jitsim with, under TF's dump flags). Weights start at zero; no download.
"""

import os
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()
out = sys.argv[1]
x = tf1.placeholder(tf.float32, [None, 784], name="x")
y_ = tf1.placeholder(tf.int64, [None], name="y_")
w = tf1.get_variable("w", [784, 10], initializer=tf1.zeros_initializer())
b = tf1.get_variable("b", [10], initializer=tf1.zeros_initializer())
y = tf.matmul(x, w) + b
cross_entropy = tf1.losses.sparse_softmax_cross_entropy(labels=y_, logits=y)
train_step = tf1.train.GradientDescentOptimizer(0.5).minimize(cross_entropy, name="train_step")
accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(y, 1), y_), tf.float32), name="accuracy")
init = tf1.global_variables_initializer()
saver = tf1.train.Saver()
tf1.add_to_collection("train_op", train_step)
config = tf1.ConfigProto()
config.graph_options.optimizer_options.global_jit_level = tf1.OptimizerOptions.ON_1
sess = tf1.Session(config=config)
tf.io.write_graph(sess.graph_def, out, "graph.pbtxt")
tf1.train.export_meta_graph(os.path.join(out, "model.meta"))
tf1.train.export_meta_graph(os.path.join(out, "model.meta.pbtxt"), as_text=True)
if "--no-run" not in sys.argv:
    sess.run(init)
    rng = np.random.default_rng(0)
    print("JITSIM_CALL_BEGIN", file=sys.stderr, flush=True)
    sess.run(train_step, feed_dict={x: rng.random((100, 784), dtype=np.float32), y_: rng.integers(0, 10, 100)})
